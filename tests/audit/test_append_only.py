"""Immutability in depth (issue 6): the platform's operation audit and the console's record
refuse UPDATE and DELETE at the database, through the ORM and through raw SQL, with an error
(MariaDB's trigger signals, it does not silently skip); inserts still work; and a decision whose
audit cannot be written is not made (fail closed, RV5).

Runs on SQLite and on MariaDB (``DATABASE_URL``): the triggers are created by migrations.
"""

from collections.abc import Callable
from functools import partial
from typing import Any

import httpx
import pytest
from django.db import DatabaseError, connection
from django.utils import timezone

from orbit_console.audit.models import ChainVerification, WrittenCheckpoint
from orbit_console.decisions.models import ConsoleEvent, Submission
from orbit_console.decisions.submissions import record_event
from orbit_console.ledger.models import IdempotencyRecord, OperationAudit, Task, TaskEvent
from orbit_console.lib.ids import new_id
from tests.audit.conftest import (
    AUDIT_TABLE,
    CONSOLE_TABLE,
    VERIFICATION_TABLE,
    WRITTEN_TABLE,
    append_only_lifted,
    execute,
    inserts_refused,
    trigger_names,
)
from tests.console.web import (
    Console,
    review_values,
    submission_id_of,
    text_of,
    wizard_submit,
    wizard_to_confirm,
)
from tests.support.orbit import REVIEW_REVISION, get_task, new_key, post, review_body
from tests.support.people import TestPerson

AUDIT_COLUMNS = [
    "id",
    "namespace_id",
    "task_id",
    "seq",
    "operation_id",
    "actor_id",
    "action",
    "reason",
    "evidence_ref",
    "before",
    "after",
    "created_at",
    "prev_hash",
    "entry_hash",
]
EVENT_COLUMNS = [
    "id",
    "seq",
    "kind",
    "task_id",
    "queue_id",
    "submission_id",
    "proposal_id",
    "actor_id",
    "note",
    "created_at",
    "prev_hash",
    "entry_hash",
]


def audit_row(record_id: str) -> tuple[Any, ...]:
    return tuple(OperationAudit.objects.filter(id=record_id).values_list(*AUDIT_COLUMNS).get())


def event_row(event_id: str) -> tuple[Any, ...]:
    return tuple(ConsoleEvent.objects.filter(id=event_id).values_list(*EVENT_COLUMNS).get())


def refused(attempt: Callable[[], object]) -> str:
    """Run a write that the database must refuse; the message it refused with."""
    with pytest.raises(DatabaseError) as raised:
        attempt()
    return str(raised.value)


def raw(sql: str, params: list[Any]) -> int:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.rowcount


@pytest.fixture
def audit_record(world: dict[str, Any]) -> OperationAudit:
    """A record of the seeded NEEDS_REVIEW task's audit chain (its acceptance)."""
    return OperationAudit.objects.filter(task_id=world["tasks"]["needs_review"]).order_by("seq")[0]


@pytest.fixture
def console_event(submission: Submission) -> ConsoleEvent:
    """An entry of the console's record: a stored (never sent) decision of the operator."""
    return ConsoleEvent.objects.get(submission=submission, kind="submission.stored")


def test_migrations_create_both_triggers_on_both_records(live_db: None) -> None:
    for table in (AUDIT_TABLE, CONSOLE_TABLE):
        assert {f"{table}_no_update", f"{table}_no_delete"} <= trigger_names(table), table


def test_the_verification_results_and_the_list_of_checkpoints_are_append_only(
    live_db: None,
) -> None:
    """Issue 29 (b): the runtime user deleted the row of checkpoint 4 (so that its file's
    absence went unseen) and could have rewritten a verification's result."""
    now = timezone.now()
    verification = ChainVerification.objects.create(
        ran_at=now, ok=False, checked=1, first_break="a break"
    )
    listed = WrittenCheckpoint.objects.create(
        series=new_id(), number=4, digest="0" * 64, taken_at=now
    )
    try:
        for table, model, row in (
            (VERIFICATION_TABLE, ChainVerification, verification),
            (WRITTEN_TABLE, WrittenCheckpoint, listed),
        ):
            assert {f"{table}_no_update", f"{table}_no_delete"} <= trigger_names(table)
            rows = model.objects.filter(id=row.id)  # type: ignore[attr-defined]
            before = rows.values().get()
            assert "append-only" in refused(lambda rows=rows: rows.update(key_id="forged"))
            assert "append-only" in refused(row.save)
            assert "append-only" in refused(rows.delete)
            for sql in (
                f"UPDATE {table} SET key_id = 'forged' WHERE id = %s",  # noqa: S608 -- our names
                f"DELETE FROM {table} WHERE id = %s",  # noqa: S608
            ):
                assert "append-only" in refused(partial(raw, sql, [row.id])), sql
            assert rows.values().get() == before
    finally:
        with append_only_lifted(VERIFICATION_TABLE, WRITTEN_TABLE):
            ChainVerification.objects.filter(id=verification.id).delete()
            WrittenCheckpoint.objects.filter(id=listed.id).delete()


def test_operation_audit_refuses_update_through_the_orm(audit_record: OperationAudit) -> None:
    before = audit_row(audit_record.id)
    rows = OperationAudit.objects.filter(id=audit_record.id)
    assert "append-only" in refused(lambda: rows.update(reason="rewritten"))
    audit_record.reason = "rewritten by save()"
    assert "append-only" in refused(audit_record.save)
    assert audit_row(audit_record.id) == before


def test_operation_audit_refuses_delete_through_the_orm(audit_record: OperationAudit) -> None:
    before = audit_row(audit_record.id)
    assert "append-only" in refused(OperationAudit.objects.filter(id=audit_record.id).delete)
    assert "append-only" in refused(audit_record.delete)
    assert audit_row(audit_record.id) == before


def test_operation_audit_refuses_raw_update_and_delete(audit_record: OperationAudit) -> None:
    before = audit_row(audit_record.id)
    count = OperationAudit.objects.filter(task_id=audit_record.task_id).count()
    statements: list[tuple[str, list[Any]]] = [
        (
            "UPDATE ledger_operationaudit SET reason = %s WHERE id = %s",
            ["rewritten", audit_record.id],
        ),
        (
            "UPDATE ledger_operationaudit SET evidence_ref = %s WHERE task_id = %s",
            ["x", audit_record.task_id],
        ),
        ("DELETE FROM ledger_operationaudit WHERE id = %s", [audit_record.id]),
        ("DELETE FROM ledger_operationaudit WHERE task_id = %s", [audit_record.task_id]),
    ]
    for sql, params in statements:
        assert "append-only" in refused(partial(raw, sql, params)), sql
    assert audit_row(audit_record.id) == before
    assert OperationAudit.objects.filter(task_id=audit_record.task_id).count() == count


def test_console_record_refuses_update_through_the_orm(console_event: ConsoleEvent) -> None:
    before = event_row(console_event.id)
    rows = ConsoleEvent.objects.filter(id=console_event.id)
    assert "append-only" in refused(lambda: rows.update(note="rewritten"))
    console_event.note = "rewritten by save()"
    assert "append-only" in refused(console_event.save)
    assert event_row(console_event.id) == before


def test_console_record_refuses_delete_through_the_orm(console_event: ConsoleEvent) -> None:
    before = event_row(console_event.id)
    assert "append-only" in refused(ConsoleEvent.objects.filter(id=console_event.id).delete)
    assert "append-only" in refused(console_event.delete)
    assert event_row(console_event.id) == before


def test_console_record_refuses_raw_update_and_delete(console_event: ConsoleEvent) -> None:
    before = event_row(console_event.id)
    statements: list[tuple[str, list[Any]]] = [
        (
            "UPDATE console_consoleevent SET note = %s WHERE id = %s",
            ["rewritten", console_event.id],
        ),
        ("UPDATE console_consoleevent SET actor_id = NULL WHERE id = %s", [console_event.id]),
        ("DELETE FROM console_consoleevent WHERE id = %s", [console_event.id]),
        ("DELETE FROM console_consoleevent WHERE seq >= %s", [console_event.seq]),
    ]
    for sql, params in statements:
        assert "append-only" in refused(partial(raw, sql, params)), sql
    assert event_row(console_event.id) == before


def test_a_refused_write_inside_a_transaction_changes_nothing(
    console_event: ConsoleEvent, audit_record: OperationAudit
) -> None:
    """The refusal is an error that aborts the statement, not a skip that lets a transaction
    commit half of its work."""
    from django.db import transaction

    events_before = event_row(console_event.id)
    audit_before = audit_row(audit_record.id)
    submission_id = console_event.submission_id

    def after_a_permitted_write(refused_write: Callable[[], object]) -> Callable[[], None]:
        def attempt() -> None:
            with transaction.atomic():
                Submission.objects.filter(id=submission_id).update(error_message="half done")
                refused_write()

        return attempt

    rewrite_event = ConsoleEvent.objects.filter(id=console_event.id)
    rewrite_audit = OperationAudit.objects.filter(id=audit_record.id)
    assert "append-only" in refused(
        after_a_permitted_write(lambda: rewrite_event.update(note="rewritten"))
    )
    assert "append-only" in refused(
        after_a_permitted_write(lambda: rewrite_audit.update(reason="rewritten"))
    )
    assert Submission.objects.get(id=submission_id).error_message == ""
    assert event_row(console_event.id) == events_before
    assert audit_row(audit_record.id) == audit_before


def test_inserts_still_work_on_both_records(
    console_event: ConsoleEvent, api: httpx.Client, world: dict[str, Any]
) -> None:
    submission = Submission.objects.get(id=console_event.submission_id)
    added = record_event("submission.sent", submission=submission, actor=None, note="appended")
    assert ConsoleEvent.objects.filter(id=added.id, note="appended").exists()
    assert added.seq > console_event.seq

    task_id = world["tasks"]["needs_review"]
    count = OperationAudit.objects.filter(task_id=task_id).count()
    answer = post(api, task_id, "review", world["tokens"]["admin"], review_body())
    assert answer.status_code == 200, answer.text
    record = OperationAudit.objects.get(id=answer.json()["data"]["audit_id"])
    assert record.action == "task.review" and record.seq == count + 1


# --- Fail closed: no decision without its audit (RV5) -------------------------------------------


def task_row(task_id: str) -> tuple[Any, ...]:
    fields = ["state", "revision", "result", "effect_uncertain", "completed_at", "updated_at"]
    return tuple(Task.objects.filter(id=task_id).values_list(*fields).get())


def test_review_fails_closed_when_the_audit_cannot_be_written_RV5(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    token = world["tokens"]["admin"]
    key = new_key()
    body = review_body()
    before = task_row(task_id)
    audits = OperationAudit.objects.filter(task_id=task_id).count()
    results = TaskEvent.objects.filter(task_id=task_id).count()

    with inserts_refused(AUDIT_TABLE):
        answer = post(api, task_id, "review", token, body, key=key)
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "UNAVAILABLE"

    # Nothing of the decision stayed: not the state, not the receipt, not the result event.
    assert task_row(task_id) == before
    assert task_row(task_id)[:2] == ("NEEDS_REVIEW", int(REVIEW_REVISION))
    assert OperationAudit.objects.filter(task_id=task_id).count() == audits
    assert TaskEvent.objects.filter(task_id=task_id).count() == results
    assert not IdempotencyRecord.objects.filter(task_id=task_id).exists()
    current = get_task(api, task_id, token).json()["data"]
    assert (current["state"], current["revision"]) == ("NEEDS_REVIEW", REVIEW_REVISION)

    # The audit can be written again: the identical request (same key, C9) is applied now.
    again = post(api, task_id, "review", token, body, key=key)
    assert again.status_code == 200, again.text
    data = again.json()["data"]
    assert data["deduplicated"] is False
    assert (data["task"]["state"], data["task"]["revision"]) == ("FAILED", "4")
    record = OperationAudit.objects.get(id=data["audit_id"])
    assert (record.task_id, record.action) == (task_id, "task.review")


def test_retry_fails_closed_when_the_audit_cannot_be_written_RV5(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    """RT9: the retry's audit lives on the source; without it, no successor is created."""
    from tests.support.orbit import retry_body

    task_id = world["tasks"]["failed"]
    token = world["tokens"]["admin"]
    key = new_key()
    before = task_row(task_id)
    with inserts_refused(AUDIT_TABLE):
        answer = post(api, task_id, "retry", token, retry_body(), key=key)
        assert answer.status_code == 503, answer.text
        assert answer.json()["error"]["code"] == "UNAVAILABLE"
    assert task_row(task_id) == before
    assert not Task.objects.filter(retry_of=task_id).exists()
    again = post(api, task_id, "retry", token, retry_body(), key=key)
    assert again.status_code == 201, again.text
    assert Task.objects.filter(retry_of=task_id).count() == 1


def test_console_decision_fails_closed_when_its_record_cannot_be_written(
    console_as: Callable[..., Console],
    people: dict[str, TestPerson],
    world: dict[str, Any],
    api: httpx.Client,
) -> None:
    operator = console_as(people["operator"])
    task_id = world["tasks"]["needs_review"]
    confirm = wizard_to_confirm(operator, task_id, "review", review_values())
    events = ConsoleEvent.objects.count()

    with inserts_refused(CONSOLE_TABLE):
        answer = wizard_submit(operator, task_id, "review", confirm.text)
        assert answer.status_code >= 500, text_of(answer.text)

    # No submission without its console event, and nothing was sent to the platform.
    assert not Submission.objects.filter(task_id=task_id).exists()
    assert ConsoleEvent.objects.count() == events
    current = get_task(api, task_id, world["tokens"]["admin"]).json()["data"]
    assert (current["state"], current["revision"]) == ("NEEDS_REVIEW", REVIEW_REVISION)

    # With the record writable again, the same decision goes through.
    submission_id = submission_id_of(wizard_submit(operator, task_id, "review", confirm.text))
    submission = Submission.objects.get(id=submission_id)
    assert (submission.task_id, submission.state) == (task_id, "succeeded")
    kinds = list(submission.events.order_by("seq").values_list("kind", flat=True))
    assert kinds == ["submission.stored", "submission.sent", "submission.receipt"]


def test_trigger_error_is_raised_on_the_database_not_only_in_python(
    audit_record: OperationAudit,
) -> None:
    """A statement run outside Django's ORM (another client, a console session) is refused
    the same way: the guard lives in the database."""
    if connection.vendor == "sqlite":
        import sqlite3

        path = connection.settings_dict["NAME"]
        other = sqlite3.connect(path)
        try:
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                other.execute("DELETE FROM ledger_operationaudit WHERE id = ?", [audit_record.id])
        finally:
            other.close()
    else:
        import MySQLdb

        settings = connection.settings_dict
        other = MySQLdb.connect(
            host=settings.get("HOST") or "127.0.0.1",
            port=int(settings.get("PORT") or 3306),
            user=settings.get("USER") or "root",
            password=settings.get("PASSWORD") or "",
            database=settings["NAME"],
        )
        try:
            cursor = other.cursor()
            with pytest.raises(MySQLdb.OperationalError) as raised:
                cursor.execute("DELETE FROM ledger_operationaudit WHERE id = %s", [audit_record.id])
            assert raised.value.args[0] == 1644  # ER_SIGNAL_EXCEPTION: SQLSTATE 45000
            assert "append-only" in str(raised.value)
        finally:
            other.close()
    execute("SELECT 1")
    assert OperationAudit.objects.filter(id=audit_record.id).exists()
