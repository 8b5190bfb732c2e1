"""Helpers for the audit suites (issue 6): people signed in to the console, database triggers
switched on and off for a test, and ``manage.py audit verify`` run as a real process.

The append-only triggers are created by migrations (``lib/appendonly.py``). A test that must
change an audit row (to prove that ``audit verify`` notices) lifts them for that moment only
and creates them again in a ``finally`` block, whatever happened in between.
"""

import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from django.db import connection

from orbit_console.audit.models import WrittenCheckpoint
from orbit_console.decisions.models import ConsoleEvent, Submission
from orbit_console.decisions.submissions import record_event, submission_create
from orbit_console.lib.appendonly import create_statements, drop_statements
from tests.console.web import Console, signed_in
from tests.support.orbit import REVIEW_REVISION
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer, run_manage

AUDIT_TABLE = "ledger_operationaudit"
CONSOLE_TABLE = "console_consoleevent"
VERIFICATION_TABLE = "audit_chainverification"
WRITTEN_TABLE = "audit_writtencheckpoint"


def execute(*statements: str) -> None:
    with connection.cursor() as cursor:
        for statement in statements:
            cursor.execute(statement)


def trigger_names(table: str) -> set[str]:
    """The triggers the database holds on ``table``."""
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = %s", [table]
            )
        else:
            cursor.execute(
                "SELECT trigger_name FROM information_schema.triggers "
                "WHERE event_object_schema = DATABASE() AND event_object_table = %s",
                [table],
            )
        return {row[0] for row in cursor.fetchall()}


@contextmanager
def append_only_lifted(*tables: str) -> Iterator[None]:
    """Drop the append-only triggers of ``tables`` (as someone with DDL rights could), and
    create them again afterwards, whatever happened."""
    try:
        for table in tables:
            execute(*drop_statements(table))
        yield
    finally:
        for table in tables:
            execute(*drop_statements(table), *create_statements(connection.vendor, table))


@contextmanager
def inserts_refused(table: str) -> Iterator[None]:
    """An extra trigger that refuses every INSERT into ``table``: the audit cannot be written."""
    with statements_refused(table, "INSERT", f"{table}: audit storage unavailable (test)"):
        yield


@contextmanager
def statements_refused(table: str, event: str, message: str) -> Iterator[None]:
    """An extra trigger that refuses every ``event`` (INSERT, UPDATE, DELETE) on ``table`` with
    ``message``: a real database error, for as long as the block runs."""
    name = f"{table}_test_no_{event.lower()}"
    if connection.vendor == "sqlite":
        create = (
            f"CREATE TRIGGER {name} BEFORE {event} ON {table} "
            f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
        )
    else:
        create = (
            f"CREATE TRIGGER {name} BEFORE {event} ON {table} FOR EACH ROW "
            f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{message}'"
        )
    execute(f"DROP TRIGGER IF EXISTS {name}", create)
    try:
        yield
    finally:
        execute(f"DROP TRIGGER IF EXISTS {name}")


def forget_checkpoints() -> None:
    """Empty the database's list of written checkpoints, as only someone with DDL rights can:
    the test database is shared and each test's checkpoint folder is its own, so a test that
    leaves its list behind would be a lost folder to the next one."""
    with append_only_lifted(WRITTEN_TABLE):
        WrittenCheckpoint.objects.all().delete()


def audit_verify() -> subprocess.CompletedProcess[str]:
    """``manage.py audit verify`` in its own process, on the test database."""
    return run_manage("audit", "verify", timeout=600)


def verify_output(done: subprocess.CompletedProcess[str]) -> str:
    return done.stdout + done.stderr


@pytest.fixture
def console_as(orbit_server: DaphneServer) -> Iterator[Callable[..., Console]]:
    """Sign a person in to ``orbit_server``'s console (cookies kept, CSRF from the pages)."""
    opened: list[Console] = []

    def sign_in(person: TestPerson, **kwargs: Any) -> Console:
        console = signed_in(orbit_server.url, person, **kwargs)
        opened.append(console)
        return console

    yield sign_in
    for console in opened:
        console.close()


@pytest.fixture
def submission(world: dict[str, Any], people: dict[str, TestPerson]) -> Submission:
    """A decision of the operator's, stored and never sent: its events are this test's own."""
    return submission_create(
        action="review",
        task_id=world["tasks"]["needs_review_2"],
        queue_id=world["queue_id"],
        expected_revision=REVIEW_REVISION,
        body='{"reason": "as stored"}',
        created_by=people["operator"].user,
        note="stored for the verification tests",
    ).submission


def more_events(submission: Submission, count: int) -> list[ConsoleEvent]:
    return [
        record_event("submission.sent", submission=submission, actor=None, note=f"entry {index}")
        for index in range(count)
    ]
