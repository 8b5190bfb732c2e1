"""The hash chain of each task's operation audit (see ``OperationAudit``)."""

import hashlib

from orbit_console.ledger.models import OperationAudit
from orbit_console.lib import strictjson
from orbit_console.lib.keyset import ascending
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


def verify() -> tuple[int, str | None]:
    """Walk every task's audit chain; return how many records were checked and a description
    of the first break (``None`` when every chain is intact). Streams: memory stays bounded."""
    checked = 0
    task_id: str | None = None
    expected_seq, previous = 1, ""
    # Keyset batches on (task_id, seq), which the OR form reads from that index on MariaDB.
    for record in ascending(OperationAudit.objects.all(), ("task_id", "seq")):
        if record.task_id != task_id:
            task_id, expected_seq, previous = record.task_id, 1, ""
        checked += 1
        where = f"ledger audit of task {record.task_id}, record {record.id} (seq {record.seq})"
        if record.seq != expected_seq:
            return checked, f"{where}: expected seq {expected_seq}; a record is missing"
        if record.prev_hash != previous:
            return checked, f"{where}: does not link to the record before it"
        if entry_hash(record) != record.entry_hash:
            return checked, f"{where}: its content does not match its hash; it was changed"
        expected_seq, previous = expected_seq + 1, record.entry_hash
    return checked, None
