"""The hash chain of each task's operation audit (see ``OperationAudit``)."""

import hashlib

from orbit_console.ledger.models import OperationAudit
from orbit_console.lib import strictjson
from orbit_console.lib.rfc3339 import format_utc


def entry_hash(record: OperationAudit) -> str:
    content = {
        "id": record.id,
        "namespace_id": record.namespace_id,
        "task_id": record.task_id,
        "seq": record.seq,
        "operation_id": record.operation_id,
        "actor_id": record.actor_id,
        "action": record.action,
        "reason": record.reason,
        "evidence_ref": record.evidence_ref,
        "before": strictjson.loads(record.before),
        "after": strictjson.loads(record.after),
        "created_at": format_utc(record.created_at),
        "prev_hash": record.prev_hash,
    }
    return hashlib.sha256(strictjson.canonical(content).encode()).hexdigest()
