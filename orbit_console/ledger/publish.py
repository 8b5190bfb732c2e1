"""Live notifications of the embedded ledger: after a transaction commits, each new audit
record is announced to its task's group (``lib/live.py``).

This is the in-process counterpart of Orbit's event stream (I3): a notification only prompts
subscribers; what each may see is decided by their own credential.
"""

import json
from typing import Any

from orbit_console.ledger.models import OperationAudit
from orbit_console.lib.live import OPERATION_MESSAGE, publish_on_commit, task_group
from orbit_console.lib.rfc3339 import format_utc


def operation_message(record: OperationAudit) -> dict[str, Any]:
    """The operation detail (AU5) as a channel-layer message: plain JSON types only."""
    detail: dict[str, Any] = {
        "id": record.id,
        "task_id": record.task_id,
        "operation_id": record.operation_id,
        "actor_id": record.actor_id,
        "action": record.action,
        "created_at": format_utc(record.created_at),
        "reason": record.reason,
        "before": json.loads(record.before),
        "after": json.loads(record.after),
    }
    if record.evidence_ref is not None:
        detail["evidence_ref"] = record.evidence_ref
    return {"type": OPERATION_MESSAGE, "operation": detail}


def announce_on_commit(record: OperationAudit) -> None:
    publish_on_commit(task_group(record.task_id), operation_message(record))
