"""The hash chain of each task's operation audit (see ``OperationAudit``)."""

import hashlib
from collections.abc import Iterator

from django.db.models import Q

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


def _in_order(batch: int = 2000) -> Iterator[OperationAudit]:
    """Every record by (task, seq), read in keyset batches: ``.iterator()`` would stream on
    SQLite but not on MySQL/MariaDB, whose driver holds the whole result set in memory. The
    OR form of the keyset uses the (task_id, seq) index on MariaDB (docs: hard parts)."""
    records = OperationAudit.objects.order_by("task_id", "seq")
    position: Q = Q()
    while batch_records := list(records.filter(position)[:batch]):
        yield from batch_records
        last = batch_records[-1]
        position = Q(task_id__gt=last.task_id) | Q(task_id=last.task_id, seq__gt=last.seq)


def verify() -> tuple[int, str | None]:
    """Walk every task's audit chain; return how many records were checked and a description
    of the first break (``None`` when every chain is intact). Streams: memory stays bounded."""
    checked = 0
    task_id: str | None = None
    expected_seq, previous = 1, ""
    for record in _in_order():
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
