"""What every write of the ledger records, shared by the recovery services and the lifecycle:
audit records (the per-task hash chain), task events and quota accounting."""

from collections.abc import Callable
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection

from orbit_console.ledger import chain
from orbit_console.ledger.errors import ApplicationFull, QueueFull
from orbit_console.ledger.models import OperationAudit, Task, TaskEvent
from orbit_console.ledger.publish import announce_on_commit
from orbit_console.ledger.serializers import json_text
from orbit_console.ledger.tables import APPLICATIONS, AUDIT, EVENTS, QUEUES
from orbit_console.lib import auditkeys, strictjson
from orbit_console.lib.ids import new_id


def take_quota(task: Task) -> None:
    """RT7: lock the queue, then the application (the same order everywhere), and refuse when
    either is full. The caller counts the task in (``hold_quota``) once it is created."""
    queue = QUEUES.one("id = %s", [task.queue_id], for_update=True)
    if queue is None or queue.in_use >= queue.capacity:
        raise QueueFull(
            "the queue is full; send the same request again later",
            retry_after_ms=settings.ORBIT_RETRY_AFTER_MS,
        )
    application = APPLICATIONS.one("id = %s", [task.application_id], for_update=True)
    if application is None or not application.enabled or application.in_use >= application.quota:
        raise ApplicationFull(
            "the application's quota is used up; send the same request again later",
            retry_after_ms=settings.ORBIT_RETRY_AFTER_MS,
        )


def hold_quota(task: Task) -> None:
    """Count a task just created (after ``take_quota``) in its queue's and application's use."""
    _count(task, "in_use = in_use + 1")


def release_quota(task: Task) -> None:
    """RV5: a task leaving the non-terminal states gives back one unit of quota."""
    _count(task, "in_use = in_use - 1", only_if="in_use > 0")


def _count(task: Task, assignment: str, *, only_if: str = "") -> None:
    """Plain SQL: every settlement runs these two counters, and building them through the ORM
    cost a tenth of a review's CPU (docs/performance.md)."""
    condition = f" AND {only_if}" if only_if else ""
    with connection.cursor() as cursor:
        for rows, row_id in ((QUEUES, task.queue_id), (APPLICATIONS, task.application_id)):
            cursor.execute(
                f"UPDATE {rows.table} SET {assignment} WHERE id = %s{condition}",  # noqa: S608 -- fixed text and a model's own table
                [row_id],
            )


def write_audit(
    *,
    task: Task,
    operation_id: str,
    actor_id: str,
    action: str,
    reason: str,
    evidence_ref: str | None,
    before: dict[str, Any] | None,
    after: dict[str, Any],
    now: datetime,
) -> OperationAudit:
    """Append to the task's audit chain. The caller holds the task's row lock (or created the
    task in this transaction), so the chain's tail cannot move under us."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT seq, entry_hash FROM {AUDIT.table} WHERE task_id = %s "  # noqa: S608 -- the model's own table
            "ORDER BY seq DESC LIMIT 1",
            [task.id],
        )
        previous = cursor.fetchone()
    record = OperationAudit(
        id=new_id(),
        namespace_id=task.namespace_id,
        task_id=task.id,
        seq=previous[0] + 1 if previous else 1,
        operation_id=operation_id,
        actor_id=actor_id,
        action=action,
        reason=reason,
        evidence_ref=evidence_ref,
        before=json_text(before),
        after=json_text(after),
        created_at=now,
        prev_hash=previous[1] if previous else "",
        key_id=auditkeys.current_key_id(),
    )
    record.entry_hash = chain.entry_hash(record)
    AUDIT.insert(record)
    chain.mark_moved(record)
    announce_on_commit(record)
    return record


# Called with every event inside the transaction that wrote it. The event stream registers
# here when it is ready (``orbit_console/events``), so that the ledger does not import it.
EventListener = Callable[[TaskEvent], None]
_listeners: list[EventListener] = []


def listen_to_events(listener: EventListener) -> None:
    if listener not in _listeners:
        _listeners.append(listener)


def record_event(
    task: Task,
    *,
    kind: str,
    audit: OperationAudit,
    now: datetime,
    detail: dict[str, str] | None = None,
) -> TaskEvent:
    """Append an event of the task at its current state and revision (docs/events.md): a
    result event carries the task's result; every event names the operation that caused it
    and its audit record."""
    event = TaskEvent(
        event_id=new_id(),
        namespace_id=task.namespace_id,
        queue_id=task.queue_id,
        task_id=task.id,
        kind=kind,
        state=task.state,
        revision=task.revision,
        result=task.result if kind in RESULT_EVENTS else None,
        operation=audit.action,
        audit_id=audit.id,
        detail=strictjson.dumps(detail or {}),
        created_at=now,
    )
    EVENTS.insert(event)
    for listener in _listeners:
        listener(event)
    return event


TASK_ACCEPTED = "task.accepted"
TASK_NEEDS_REVIEW = "task.needs_review"
TASK_COMPLETED = "task.completed"
RESULT_EVENTS = frozenset({TASK_NEEDS_REVIEW, TASK_COMPLETED})
