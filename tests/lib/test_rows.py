"""``lib/rows.Rows``: plain-SQL reads and writes that give exactly what the ORM gives (issue 12),
on the database the suite runs on (SQLite, or MariaDB in CI's second run)."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import IntegrityError, connection, transaction
from django.test.utils import CaptureQueriesContext

from orbit_console.ledger.models import (
    Application,
    IdempotencyRecord,
    Namespace,
    Queue,
    Task,
    TaskEvent,
)
from orbit_console.lib.ids import new_id
from orbit_console.lib.rows import Rows

TASKS = Rows(Task)
EVENTS = Rows(TaskEvent)
RECEIPTS = Rows(IdempotencyRecord)


def concrete_values(instance: Any) -> dict[str, Any]:
    return {
        field.attname: getattr(instance, field.attname)
        for field in type(instance)._meta.concrete_fields
    }


@pytest.fixture
def task(world: dict[str, Any]) -> Task:
    """A task of every kind of column: times with microseconds, NULLs, booleans, text."""
    namespace = Namespace.objects.get(id=world["namespace_id"])
    queue = Queue.objects.filter(namespace=namespace).first()
    application = Application.objects.filter(namespace=namespace).first()
    assert queue is not None and application is not None
    now = datetime(2026, 12, 2, 6, 30, 15, 123456, tzinfo=UTC)
    task = Task(
        id=new_id(),
        namespace_id=namespace.id,
        queue_id=queue.id,
        application_id=application.id,
        state="NEEDS_REVIEW",
        revision=7,
        handler="rows.test",
        handler_version="v1",
        payload_version="1",
        payload='{"é": 1.50}',
        business_key="bk-1",
        recovery_safety="MANUAL",
        retry_max_attempts=3,
        retry_initial_delay_ms=10,
        retry_max_delay_ms=100,
        retry_attempt_timeout_ms=1000,
        available_at=now,
        deadline_at=now + timedelta(hours=1),
        created_at=now,
        updated_at=now,
        effect_uncertain=True,
    )
    TASKS.insert(task)
    return task


def test_a_row_read_is_the_row_the_orm_reads(task: Task) -> None:
    """Every column, converted as Django converts it: aware datetimes, booleans, NULLs."""
    orm = Task.objects.get(id=task.id)
    plain = TASKS.one("id = %s", [task.id])
    assert plain is not None
    assert concrete_values(plain) == concrete_values(orm) == concrete_values(task)
    assert plain.available_at.tzinfo is not None and plain.effect_uncertain is True
    assert plain.start_deadline_at is None and plain.result is None
    assert not plain._state.adding and plain._state.db == "default"


def test_nothing_found_is_none_and_many_keeps_order(task: Task) -> None:
    assert TASKS.one("id = %s", [new_id()]) is None
    second = Task.objects.get(id=task.id)
    second.id, second.business_key = new_id(), "bk-2"
    TASKS.insert(second)
    found = TASKS.many(
        "namespace_id = %s AND handler = %s",
        [task.namespace_id, "rows.test"],
        order_by="business_key DESC",
    )
    assert [row.business_key for row in found] == ["bk-2", "bk-1"]
    assert len(TASKS.many("handler = %s", ["rows.test"], limit=1)) == 1


def test_an_update_writes_the_named_fields_only(task: Task) -> None:
    later = datetime(2026, 12, 3, 1, 2, 3, 456789, tzinfo=UTC)
    stale = Task.objects.get(id=task.id)
    task.state, task.revision, task.result, task.completed_at = "FAILED", 8, '{"a":1}', later
    task.handler = "not written"
    assert TASKS.update(task, ["state", "revision", "result", "completed_at"]) == 1
    stored = Task.objects.get(id=task.id)
    assert (stored.state, stored.revision, stored.result, stored.completed_at) == (
        "FAILED",
        8,
        '{"a":1}',
        later,
    )
    assert stored.handler == stale.handler == "rows.test"


def test_an_insert_leaves_the_auto_increment_key_to_the_database(task: Task) -> None:
    """TaskEvent's ``sequence`` is the database's; its other fields are written as given."""
    event = TaskEvent(
        namespace_id=task.namespace_id,
        task_id=task.id,
        kind="task.completed",
        state="FAILED",
        revision=8,
        result=None,
        created_at=task.created_at,
    )
    EVENTS.insert(event)
    second = TaskEvent(**{**concrete_values(event), "sequence": None, "event_id": new_id()})
    EVENTS.insert(second)
    stored = list(TaskEvent.objects.filter(task_id=task.id).order_by("sequence"))
    assert stored[0].event_id == event.event_id
    assert stored[0].sequence < stored[1].sequence
    # The key the database gave is read back onto the instance.
    assert (event.sequence, second.sequence) == (stored[0].sequence, stored[1].sequence)


def test_a_unique_index_still_refuses(task: Task) -> None:
    """The backstops of the write paths are the database's: a plain INSERT meets them too."""
    receipt = IdempotencyRecord(
        namespace_id=task.namespace_id,
        action="task.review",
        task_id=task.id,
        key_digest="0" * 64,
        request_digest="1" * 64,
        status_code=200,
        audit_id=new_id(),
        response_task="{}",
        created_at=task.created_at,
        expires_at=task.created_at + timedelta(days=1),
    )
    RECEIPTS.insert(receipt)
    receipt.id = new_id()
    with pytest.raises(IntegrityError), transaction.atomic():
        RECEIPTS.insert(receipt)


def test_for_update_locks_where_the_database_can(task: Task) -> None:
    """``FOR UPDATE`` on MySQL/MariaDB; nothing on SQLite, whose IMMEDIATE transactions hold
    the write lock from BEGIN."""
    with CaptureQueriesContext(connection) as queries, transaction.atomic():
        assert TASKS.one("id = %s", [task.id], for_update=True) is not None
    [select] = [q["sql"] for q in queries.captured_queries if q["sql"].startswith("SELECT")]
    assert select.endswith("FOR UPDATE") == connection.features.has_select_for_update
