"""Rows of the ledger as the recovery API answers them.

Revisions travel as strings, payloads and results as the raw JSON text stored (I8), times as
RFC 3339 UTC. Optional fields are omitted when unset, as in the seed's examples.
"""

import json
from typing import Any

from orbit_console.ledger.models import (
    Attempt,
    AttemptReport,
    Credential,
    OperationAudit,
    OwnerKind,
    Task,
)
from orbit_console.lib.rfc3339 import format_utc
from orbit_console.lib.strictjson import RawJSON


def task_detail(task: Task, *, retry_successor_id: str | None) -> dict[str, Any]:
    """The task detail of GetTask and of receipts (O1, RT9): the seed's task object with
    ``retry_of``, plus what a console needs to explain which recoveries are possible."""
    data: dict[str, Any] = {
        "id": task.id,
        "namespace_id": task.namespace_id,
        "queue_id": task.queue_id,
        "state": task.state,
        "revision": str(task.revision),
        "handler": task.handler,
        "handler_version": task.handler_version,
        "payload_version": task.payload_version,
        "payload": RawJSON(task.payload),
    }
    if task.business_key:
        data["business_key"] = task.business_key
    if task.concurrency_key:
        data["concurrency_key"] = task.concurrency_key
    if task.priority:
        data["priority"] = task.priority
    data["available_at"] = format_utc(task.available_at)
    if task.start_deadline_at is not None:
        data["start_deadline_at"] = format_utc(task.start_deadline_at)
    data["deadline_at"] = format_utc(task.deadline_at)
    data["recovery_safety"] = task.recovery_safety
    data["retry"] = {
        "max_attempts": task.retry_max_attempts,
        "initial_delay_ms": task.retry_initial_delay_ms,
        "max_delay_ms": task.retry_max_delay_ms,
        "attempt_timeout_ms": task.retry_attempt_timeout_ms,
    }
    data["attempt_count"] = task.attempt_count
    if task.result is not None:
        data["result"] = RawJSON(task.result)
    if task.completed_at is not None:
        data["completed_at"] = format_utc(task.completed_at)
    data["created_at"] = format_utc(task.created_at)
    data["updated_at"] = format_utc(task.updated_at)
    if task.retry_of:
        data["retry_of"] = task.retry_of
    data["effect_uncertain"] = task.effect_uncertain
    data["owner"] = _owner(task)
    data["gated"] = task.gate_id is not None
    data["leased"] = task.lease_id is not None
    if task.lease_id is not None and task.lease_expires_at is not None:
        data["lease_expires_at"] = format_utc(task.lease_expires_at)
    data["active_attempt"] = task.active_attempt_id is not None
    data["unreleased_permit"] = task.permit_id is not None
    if retry_successor_id:
        data["retry_successor_id"] = retry_successor_id
    return data


def _owner(task: Task) -> dict[str, str]:
    if task.owner_kind == OwnerKind.PLAN:
        return {"kind": "PLAN", "plan_id": task.owner_id or "", "trigger_id": task.trigger_id or ""}
    if task.owner_kind == OwnerKind.WORKFLOW:
        return {"kind": "WORKFLOW", "workflow_id": task.owner_id or ""}
    return {"kind": "NONE"}


def task_summary(task: Task) -> dict[str, Any]:
    """An item of the task list: no payload, no result, and never ``retry_of`` (RT9)."""
    data: dict[str, Any] = {
        "id": task.id,
        "namespace_id": task.namespace_id,
        "queue_id": task.queue_id,
        "state": task.state,
        "revision": str(task.revision),
        "handler": task.handler,
        "handler_version": task.handler_version,
    }
    if task.business_key:
        data["business_key"] = task.business_key
    data["attempt_count"] = task.attempt_count
    data["effect_uncertain"] = task.effect_uncertain
    data["created_at"] = format_utc(task.created_at)
    data["updated_at"] = format_utc(task.updated_at)
    if task.completed_at is not None:
        data["completed_at"] = format_utc(task.completed_at)
    return data


def operation_item(record: OperationAudit) -> dict[str, Any]:
    """AU4."""
    return {
        "id": record.id,
        "task_id": record.task_id,
        "operation_id": record.operation_id,
        "actor_id": record.actor_id,
        "action": record.action,
        "created_at": format_utc(record.created_at),
    }


def operation_detail(record: OperationAudit) -> dict[str, Any]:
    """AU5: the item plus reason, optional evidence reference, before and after."""
    data = operation_item(record)
    data["reason"] = record.reason
    if record.evidence_ref is not None:
        data["evidence_ref"] = record.evidence_ref
    data["before"] = RawJSON(record.before)
    data["after"] = RawJSON(record.after)
    return data


def attempt_item(attempt: Attempt, reports: list[AttemptReport]) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": attempt.id,
        "task_id": attempt.task_id,
        "number": attempt.number,
        "worker_id": attempt.worker_id,
        "started_at": format_utc(attempt.started_at),
    }
    if attempt.ended_at is not None:
        data["ended_at"] = format_utc(attempt.ended_at)
    data["outcome"] = attempt.outcome
    if attempt.error:
        data["error"] = attempt.error
    data["late_reports"] = [
        {
            "id": report.id,
            "outcome": report.outcome,
            "detail": report.detail,
            "received_at": format_utc(report.received_at),
        }
        for report in reports
    ]
    return data


def json_text(value: Any) -> str:
    """Compact JSON text for ``before``/``after`` (no floats ever reach this)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def credential_detail(
    credential: Credential, queue_ids: frozenset[str] | None, namespace_name: str
) -> dict[str, Any]:
    """What a token's holder may learn about their own credential (our choice, docs/api.md):
    whom it names and what it covers, never the token or its hash."""
    data: dict[str, Any] = {
        "id": credential.id,
        "actor_id": credential.actor_id,
        "actor_name": credential.actor_name,
        "namespace_id": credential.namespace_id,
        "namespace_name": namespace_name,
        "queue_ids": sorted(queue_ids or ()),
        "permissions": sorted(credential.permission_set),
    }
    if credential.expires_at is not None:
        data["expires_at"] = format_utc(credential.expires_at)
    return data
