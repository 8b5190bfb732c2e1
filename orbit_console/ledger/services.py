"""The recovery writes of the ledger: ``task_review`` and ``task_retry``.

Each is one transaction (RV5) shaped the same way:

1. lock the task row (``SELECT ... FOR UPDATE``; on SQLite the IMMEDIATE transaction holds the
   database write lock from BEGIN, which serialises writers the same way);
2. only then read the idempotency record, with a locking read, so that a racer that lost the
   lock sees what the winner committed (C7);
3. decide in the order of O3 — replay or ``IDEMPOTENCY_CONFLICT``, then ``STATE_CONFLICT`` and
   the time-dependent checks, then quota (429);
4. write everything: task, successor, audit records, idempotency receipt, task event (the
   review's completion, or the successor's acceptance).

Any refusal raises and rolls the whole transaction back, so a 429 leaves no idempotency record
(RT7) and nothing is ever stored without its audit. The unique indexes on the idempotency scope
and on ``(namespace_id, retry_of)`` are the backstop: if one fires, the transaction is run once
more and answers from what the winner stored.
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from orbit_console.ledger.errors import IdempotencyConflict, InvalidArgument, StateConflict
from orbit_console.ledger.journal import (
    TASK_ACCEPTED,
    TASK_COMPLETED,
    hold_quota,
    record_event,
    release_quota,
    take_quota,
    write_audit,
)
from orbit_console.ledger.models import (
    Credential,
    IdempotencyRecord,
    OwnerKind,
    Plan,
    PlanTrigger,
    Task,
    TaskState,
)
from orbit_console.ledger.requests import RetryRequest, ReviewRequest
from orbit_console.ledger.selectors import retry_successor_id, task_in_scope
from orbit_console.ledger.serializers import task_detail
from orbit_console.ledger.tables import RECEIPTS, TASKS
from orbit_console.lib.ids import new_id
from orbit_console.lib.strictjson import RawJSON, dumps

REVIEW = "task.review"
RETRY = "task.retry"
ACCEPTED = "task.accepted"
EXECUTION_RESULT = "task.execution_result"
CANCELLED = "task.cancelled"

AVAILABLE_AT_TOLERANCE = timedelta(seconds=1)  # RT3


@dataclass(frozen=True, slots=True)
class Receipt:
    status: int
    data: dict[str, Any]


def _twice_on_integrity_error(write: Callable[[], Receipt]) -> Receipt:
    try:
        with transaction.atomic():
            return write()
    except IntegrityError:
        # A racer inserted the same idempotency scope or a successor of the same source between
        # our read and our insert. Run again: the lock and the reads now see what it stored.
        with transaction.atomic():
            return write()


def key_digest(idempotency_key: str) -> str:
    return hashlib.sha256(idempotency_key.encode()).hexdigest()


# --- Review -----------------------------------------------------------------------------------


def task_review(
    *, credential: Credential, task_id: str, idempotency_key: str, request: ReviewRequest
) -> Receipt:
    """RV1-RV7: declare the outcome of a task parked in NEEDS_REVIEW."""
    return _twice_on_integrity_error(lambda: _review(credential, task_id, idempotency_key, request))


def _review(credential: Credential, task_id: str, key: str, request: ReviewRequest) -> Receipt:
    task = task_in_scope(credential, task_id, for_update=True)
    now = timezone.now()
    replay = _replay(credential, REVIEW, task, key, request.digest, now)
    if replay is not None:
        return replay

    _require_reviewable(task, request.expected_revision)

    before = {"state": task.state, "revision": str(task.revision)}
    task.state = request.outcome
    task.result = request.result
    task.effect_uncertain = False
    task.revision += 1
    task.completed_at = now
    task.updated_at = now
    TASKS.update(
        task, ["state", "result", "effect_uncertain", "revision", "completed_at", "updated_at"]
    )
    release_quota(task)
    audit = write_audit(
        task=task,
        operation_id=new_id(),
        actor_id=credential.actor_id,
        action=REVIEW,
        reason=request.reason,
        evidence_ref=request.evidence_ref,
        before=before,
        after={
            "state": task.state,
            "revision": str(task.revision),
            "effect_uncertain": False,
            "execution_settled": True,
            "result_digest": "sha256:" + hashlib.sha256(request.result.encode()).hexdigest(),
        },
        now=now,
    )
    # A task that was NEEDS_REVIEW until now has no retry successor: RT1 refuses to retry it.
    detail = task_detail(task, retry_successor_id=None)
    _store_receipt(credential, REVIEW, task, key, request.digest, 200, audit.id, detail, now)
    record_event(task, kind=TASK_COMPLETED, audit=audit, now=now)
    return Receipt(200, {"task": detail, "audit_id": audit.id, "deduplicated": False})


def _require_reviewable(task: Task, expected_revision: int) -> None:
    """RV1, RV2."""
    if task.state != TaskState.NEEDS_REVIEW:
        raise StateConflict(f"the task is {task.state}; only a NEEDS_REVIEW task can be reviewed")
    _require_revision(task, expected_revision)
    _require_no_execution(task)
    if task.owner_kind == OwnerKind.WORKFLOW:
        raise StateConflict("the task is owned by a workflow; its controller recovers it")
    if task.gate_id is not None:
        raise StateConflict("the task is held by a gate; its controller recovers it")
    if task.owner_kind == OwnerKind.PLAN:
        _require_plan_ownership(task)


def _require_plan_ownership(task: Task) -> None:
    """RV2: in this transaction, the plan and its trigger record must own the task."""
    plan = Plan.objects.select_for_update().filter(id=task.owner_id, namespace_id=task.namespace_id)
    trigger = PlanTrigger.objects.select_for_update().filter(
        id=task.trigger_id, plan_id=task.owner_id, task_id=task.id
    )
    if not plan.exists() or not trigger.exists():
        raise StateConflict("the plan and trigger that should own this task do not confirm it")


def _require_revision(task: Task, expected_revision: int) -> None:
    if task.revision != expected_revision:
        raise StateConflict(
            f"the task is at revision {task.revision}, not {expected_revision}; "
            "read it again before deciding"
        )


def _require_no_execution(task: Task) -> None:
    if task.lease_id is not None:
        raise StateConflict("the task still has a current lease")
    if task.active_attempt_id is not None:
        raise StateConflict("the task still has an active attempt")
    if task.permit_id is not None:
        raise StateConflict("the task still holds an unreleased permit")


# --- Retry ------------------------------------------------------------------------------------


def task_retry(
    *, credential: Credential, task_id: str, idempotency_key: str, request: RetryRequest
) -> Receipt:
    """RT1-RT9: create the one direct successor of a settled FAILED or CANCELLED task."""
    return _twice_on_integrity_error(lambda: _retry(credential, task_id, idempotency_key, request))


def _retry(credential: Credential, task_id: str, key: str, request: RetryRequest) -> Receipt:
    source = task_in_scope(credential, task_id, for_update=True)
    now = timezone.now()
    replay = _replay(credential, RETRY, source, key, request.digest, now)
    if replay is not None:
        return replay

    _require_retryable(source, request.expected_revision)
    deadline, available_at = _retry_times(source, request, now)
    take_quota(source)

    child = Task(
        id=new_id(),
        namespace_id=source.namespace_id,
        queue_id=source.queue_id,
        application_id=source.application_id,
        state=TaskState.WAITING,
        revision=1,
        handler=source.handler,
        handler_version=source.handler_version,
        payload_version=source.payload_version,
        payload=source.payload,
        business_key=source.business_key,
        concurrency_key=source.concurrency_key,
        priority=source.priority,
        recovery_safety=source.recovery_safety,
        retry_max_attempts=source.retry_max_attempts,
        retry_initial_delay_ms=source.retry_initial_delay_ms,
        retry_max_delay_ms=source.retry_max_delay_ms,
        retry_attempt_timeout_ms=source.retry_attempt_timeout_ms,
        attempt_count=0,
        available_at=available_at,
        start_deadline_at=request.start_deadline_at,
        deadline_at=deadline,
        created_at=now,
        updated_at=now,
        retry_of=source.id,
    )
    TASKS.insert(child)
    hold_quota(child)

    operation_id = new_id()
    audit = write_audit(
        task=source,
        operation_id=operation_id,
        actor_id=credential.actor_id,
        action=RETRY,
        reason=request.reason,
        evidence_ref=request.evidence_ref,
        before={"state": source.state, "revision": str(source.revision)},
        after={
            "source_task_id": source.id,
            "retry_task_id": child.id,
            "safe_to_retry": True,
            "task_timeout_ms": request.task_timeout_ms,
        },
        now=now,
    )
    accepted = write_audit(
        task=child,
        operation_id=operation_id,
        actor_id=credential.actor_id,
        action=ACCEPTED,
        reason=request.reason,
        evidence_ref=request.evidence_ref,
        before=None,
        after={
            "state": child.state,
            "revision": str(child.revision),
            "retry_of": source.id,
            "audit_id": audit.id,
        },
        now=now,
    )
    record_event(
        child,
        kind=TASK_ACCEPTED,
        audit=accepted,
        now=now,
        detail={"retry_of": source.id, "retry_audit_id": audit.id},
    )
    detail = task_detail(child, retry_successor_id=None)
    _store_receipt(credential, RETRY, source, key, request.digest, 201, audit.id, detail, now)
    data = {
        "source_task_id": source.id,
        "task": detail,
        "audit_id": audit.id,
        "deduplicated": False,
    }
    return Receipt(201, data)


def _require_retryable(task: Task, expected_revision: int) -> None:
    """RT1, RT6."""
    if task.state == TaskState.NEEDS_REVIEW:
        raise StateConflict("the task is NEEDS_REVIEW; review it before any retry")
    if task.state == TaskState.SUCCEEDED:
        raise StateConflict("a SUCCEEDED task can never be retried")
    if task.state not in (TaskState.FAILED, TaskState.CANCELLED):
        raise StateConflict(
            f"the task is {task.state}; only FAILED or CANCELLED tasks can be retried"
        )
    if task.owner_kind != OwnerKind.NONE:
        owner = task.owner_kind.lower()
        raise StateConflict(f"the task is owned by a {owner}; only standalone tasks can be retried")
    if task.gate_id is not None:
        raise StateConflict("the task is held by a gate; only standalone tasks can be retried")
    if task.effect_uncertain:
        raise StateConflict("the task's effect is uncertain; it cannot be retried")
    _require_revision(task, expected_revision)
    _require_no_execution(task)
    successor = retry_successor_id(task)
    if successor is not None:
        raise StateConflict(
            f"the task already has a retry successor ({successor}); act on that task instead"
        )


def _retry_times(source: Task, request: RetryRequest, now: datetime) -> tuple[datetime, datetime]:
    """RT2, RT3: the new deadline and availability, judged against one instant."""
    if request.task_timeout_ms < source.retry_attempt_timeout_ms:
        raise InvalidArgument(
            f"task_timeout_ms: must be at least the task's attempt timeout "
            f"({source.retry_attempt_timeout_ms} ms)",
            field="task_timeout_ms",
        )
    deadline = now + timedelta(milliseconds=request.task_timeout_ms)
    available_at = request.available_at or now
    if request.available_at is not None:
        if request.available_at < now - AVAILABLE_AT_TOLERANCE:
            raise InvalidArgument(
                "available_at: may be at most 1 second in the past", field="available_at"
            )
        if request.available_at >= deadline:
            raise InvalidArgument(
                "available_at: must be before the new deadline (now + task_timeout_ms)",
                field="available_at",
            )
    start_deadline = request.start_deadline_at
    if start_deadline is not None:
        if start_deadline <= now:
            raise InvalidArgument(
                "start_deadline_at: must be in the future", field="start_deadline_at"
            )
        if start_deadline < available_at:
            raise InvalidArgument(
                "start_deadline_at: must not be before available_at", field="start_deadline_at"
            )
        if start_deadline > deadline:
            raise InvalidArgument(
                "start_deadline_at: must not be after the new deadline (now + task_timeout_ms)",
                field="start_deadline_at",
            )
    return deadline, available_at


# --- Shared pieces ----------------------------------------------------------------------------


def _replay(
    credential: Credential, action: str, task: Task, key: str, digest: str, now: datetime
) -> Receipt | None:
    """C7: the stored receipt for this scope and key, ``IdempotencyConflict`` when the body
    differs, ``None`` when there is none (or it has outlived its retention, C8)."""
    record = RECEIPTS.one(
        "namespace_id = %s AND action = %s AND task_id = %s AND key_digest = %s",
        [credential.namespace_id, action, task.id, key_digest(key)],
        for_update=True,
    )
    if record is None:
        return None
    if record.expires_at <= now:
        record.delete()
        return None
    if record.request_digest != digest:
        raise IdempotencyConflict(
            "this Idempotency-Key was already used for this task with a different body"
        )
    data: dict[str, Any] = {}
    if action == RETRY:
        data["source_task_id"] = record.task_id
    data.update(
        {"task": RawJSON(record.response_task), "audit_id": record.audit_id, "deduplicated": True}
    )
    return Receipt(200, data)


def _store_receipt(
    credential: Credential,
    action: str,
    task: Task,
    key: str,
    digest: str,
    status: int,
    audit_id: str,
    detail: dict[str, Any],
    now: datetime,
) -> None:
    receipt = IdempotencyRecord(
        namespace_id=credential.namespace_id,
        action=action,
        task_id=task.id,
        key_digest=key_digest(key),
        request_digest=digest,
        status_code=status,
        audit_id=audit_id,
        response_task=dumps(detail),
        created_at=now,
        expires_at=now + timedelta(hours=settings.ORBIT_IDEMPOTENCY_RETENTION_HOURS),
    )
    RECEIPTS.insert(receipt)
