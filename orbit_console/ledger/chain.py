"""The hash chain of each task's operation audit (see ``OperationAudit``), linked with the audit
keys (``lib/auditkeys.py``)."""

from typing import Any

from orbit_console.ledger.models import OperationAudit
from orbit_console.lib import auditkeys, strictjson
from orbit_console.lib.keyset import ascending
from orbit_console.lib.rfc3339 import format_utc


def entry_hash(record: OperationAudit) -> str:
    """The record's link: an HMAC of its canonical content (its key id included) under the key
    it names. ``auditkeys.UnknownKey`` when that key is not configured."""
    return auditkeys.link(record.key_id, strictjson.canonical(content(record)).encode())


def content(record: OperationAudit) -> dict[str, Any]:
    """What a record's link covers."""
    return {
        "key_id": record.key_id,
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
        try:
            linked = entry_hash(record)
        except auditkeys.UnknownKey:
            return checked, f"{where}: names an audit key this installation does not hold"
        if linked != record.entry_hash:
            return checked, f"{where}: its content does not match its hash; it was changed"
        expected_seq, previous = expected_seq + 1, record.entry_hash
    return checked, None
