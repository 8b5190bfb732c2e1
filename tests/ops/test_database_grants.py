"""Least privilege on MySQL/MariaDB (issue 13): a user made with the runtime grants of
``deploy/mysql/grants.sql`` reads and writes rows, and cannot empty, reshape or unprotect the
append-only audit tables — no TRUNCATE, ALTER, DROP, or trigger changes — while the migration
user of the same file can. SQLite has no users: these run in the MariaDB pass of CI."""

import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import connection
from django.utils import timezone

from orbit_console.audit.models import ChainVerification, WrittenCheckpoint
from orbit_console.decisions.submissions import record_export
from orbit_console.lib.appendonly import create_statements, drop_statements
from orbit_console.lib.ids import new_id
from tests.support.people import make_person

GRANTS = Path(settings.BASE_DIR) / "deploy" / "mysql" / "grants.sql"
AUDIT_TABLES = (
    "ledger_operationaudit",
    "console_consoleevent",
    "audit_chainverification",  # issue 29 (b)
    "audit_writtencheckpoint",
)
DENIED = (1044, 1142, 1227, 1370)  # access denied to database, table, operation, routine
REFUSED_BY_TRIGGER = 1644  # SIGNAL SQLSTATE '45000'

pytestmark = pytest.mark.skipif(
    connection.vendor != "mysql", reason="database users and grants exist on MySQL/MariaDB only"
)


def grants_for(database: str, runtime: str, migrate: str) -> list[str]:
    """The statements of grants.sql, for ``database`` and these users."""
    text = re.sub(r"--[^\n]*", "", GRANTS.read_text())
    text = text.replace("`orbit`", f"`{database}`")
    text = text.replace("'orbit'@", f"'{runtime}'@").replace("'orbit_migrate'@", f"'{migrate}'@")
    return [statement.strip() for statement in text.split(";") if statement.strip()]


@pytest.fixture
def users(live_db: None) -> Iterator[dict[str, Any]]:
    """A runtime user and a migration user with the documented grants on the test database."""
    import MySQLdb

    database = connection.settings_dict["NAME"]
    suffix = secrets.token_hex(4)
    names = {"runtime": f"orbit_rt_{suffix}", "migrate": f"orbit_mg_{suffix}"}
    password = secrets.token_urlsafe(16)
    with connection.cursor() as cursor:
        for name in names.values():
            cursor.execute(f"CREATE USER '{name}'@'%%' IDENTIFIED BY %s", [password])
        for statement in grants_for(database, names["runtime"], names["migrate"]):
            cursor.execute(statement)
    opened = {
        role: MySQLdb.connect(
            host="127.0.0.1",
            port=int(connection.settings_dict.get("PORT") or 3306),
            user=name,
            password=password,
            database=database,
            autocommit=True,
        )
        for role, name in names.items()
    }
    yield opened
    for handle in opened.values():
        handle.close()
    with connection.cursor() as cursor:
        for name in names.values():
            cursor.execute(f"DROP USER '{name}'@'%'")


def error_code(handle: Any, statement: str) -> int | None:
    """The server's error number for ``statement`` (``None`` when it succeeds). The statements
    are this module's own, about fixed table names."""
    import MySQLdb

    try:
        handle.cursor().execute(statement)
    except MySQLdb.Error as error:
        return int(error.args[0])
    return None


@pytest.fixture
def audit_evidence(live_db: None) -> Iterator[None]:
    """A verification result and a listed checkpoint, removed afterwards as only the migration
    user can (a listed checkpoint without its folder would fail the next verification)."""
    now = timezone.now()
    made = [
        ChainVerification.objects.create(ran_at=now, ok=True, checked=0, first_break=""),
        WrittenCheckpoint.objects.create(series=new_id(), number=1, digest="0" * 64, taken_at=now),
    ]
    yield
    with connection.cursor() as cursor:
        for row in made:
            table = row._meta.db_table
            for statement in drop_statements(table):
                cursor.execute(statement)
            cursor.execute(f"DELETE FROM {table} WHERE id = %s", [row.pk])  # noqa: S608
            for statement in create_statements(connection.vendor, table):
                cursor.execute(statement)


def test_the_runtime_user_cannot_truncate_alter_drop_or_touch_triggers(
    users: dict[str, Any], world: dict[str, Any], audit_evidence: None
) -> None:
    # A row in each audit table (the world has platform records; an export records one here;
    # the fixture the audit app's own).
    record_export(
        actor=make_person(world, "auditor").user, note="{}", namespace_ids=[world["namespace_id"]]
    )
    runtime = users["runtime"]
    for table in AUDIT_TABLES:
        assert error_code(runtime, f"SELECT COUNT(*) FROM {table}") is None  # noqa: S608
        assert error_code(runtime, f"TRUNCATE TABLE {table}") in DENIED, table
        assert error_code(runtime, f"ALTER TABLE {table} ADD COLUMN x INT") in DENIED, table
        assert error_code(runtime, f"DROP TRIGGER {table}_no_delete") in DENIED, table
        assert error_code(runtime, f"DROP TABLE {table}") in DENIED, table
        trigger = f"CREATE TRIGGER {table}_evil BEFORE INSERT ON {table} FOR EACH ROW SET @x = 1"
        assert error_code(runtime, trigger) in DENIED, table
        # Rows: the triggers refuse its changes and deletions.
        delete, update = f"DELETE FROM {table}", f"UPDATE {table} SET id = id"  # noqa: S608
        assert error_code(runtime, delete) == REFUSED_BY_TRIGGER, table
        assert error_code(runtime, update) == REFUSED_BY_TRIGGER, table
    assert error_code(runtime, "CREATE TABLE intruder (id INT)") in DENIED
    assert error_code(runtime, "SELECT COUNT(*) FROM ledger_task") is None


def test_the_migration_user_can_change_the_schema(users: dict[str, Any]) -> None:
    migrate = users["migrate"]
    table = f"grants_probe_{secrets.token_hex(4)}"
    assert error_code(migrate, f"CREATE TABLE {table} (id INT)") is None
    assert error_code(migrate, f"ALTER TABLE {table} ADD COLUMN x INT") is None
    assert error_code(migrate, f"DROP TABLE {table}") is None
