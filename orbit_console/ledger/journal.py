"""What every write of the ledger records, shared by the recovery services and the lifecycle:
audit records (the per-task hash chain), result events and quota accounting."""

from datetime import datetime
from typing import Any

from django.conf import settings
from django.db import connection

from orbit_console.ledger import chain
from orbit_console.ledger.errors import ApplicationFull, QueueFull
from orbit_console.ledger.models import Application, OperationAudit, Queue, ResultEvent, Task
from orbit_console.ledger.publish import announce_on_commit
from orbit_console.ledger.serializers import json_text
from orbit_console.lib import auditkeys
from orbit_console.lib.ids import new_id


def take_quota(task: Task) -> tuple[Queue, Application]:
    """RT7: lock the queue, then the application (the same order everywhere), and refuse when
    either is full. The caller increments both after creating the task."""
    queue = Queue.objects.select_for_update().get(id=task.queue_id)
    if queue.in_use >= queue.capacity:
        raise QueueFull(
            "the queue is full; send the same request again later",
            retry_after_ms=settings.ORBIT_RETRY_AFTER_MS,
        )
    application = Application.objects.select_for_update().get(id=task.application_id)
    if not application.enabled or application.in_use >= application.quota:
        raise ApplicationFull(
            "the application's quota is used up; send the same request again later",
            retry_after_ms=settings.ORBIT_RETRY_AFTER_MS,
        )
    return queue, application


def release_quota(task: Task) -> None:
    """RV5: a task leaving the non-terminal states gives back one unit of quota.

    Plain SQL: every settlement runs these two counters, and building them through the ORM
    cost a tenth of a review's CPU (docs/performance.md)."""
    with connection.cursor() as cursor:
        for model, row_id in ((Queue, task.queue_id), (Application, task.application_id)):
            table = connection.ops.quote_name(model._meta.db_table)
            cursor.execute(
                f"UPDATE {table} SET in_use = in_use - 1 WHERE id = %s AND in_use > 0",  # noqa: S608 -- a model's own table name
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
    previous = (
        OperationAudit.objects.filter(task_id=task.id)
        .order_by("-seq")
        .values("seq", "entry_hash")
        .first()
    )
    record = OperationAudit(
        id=new_id(),
        namespace_id=task.namespace_id,
        task_id=task.id,
        seq=previous["seq"] + 1 if previous else 1,
        operation_id=operation_id,
        actor_id=actor_id,
        action=action,
        reason=reason,
        evidence_ref=evidence_ref,
        before=json_text(before),
        after=json_text(after),
        created_at=now,
        prev_hash=previous["entry_hash"] if previous else "",
        key_id=auditkeys.current_key_id(),
    )
    record.entry_hash = chain.entry_hash(record)
    record.save(force_insert=True)
    announce_on_commit(record)
    return record


def record_result_event(task: Task, *, kind: str, now: datetime) -> None:
    ResultEvent.objects.create(
        namespace_id=task.namespace_id,
        task_id=task.id,
        kind=kind,
        state=task.state,
        revision=task.revision,
        result=task.result,
        created_at=now,
    )
