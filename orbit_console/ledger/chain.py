"""The hash chain of each task's operation audit (see ``OperationAudit``), linked with the audit
keys (``lib/auditkeys.py``)."""

from collections.abc import Collection, Iterator
from itertools import batched
from typing import Any

from django.db.models import QuerySet

from orbit_console.audit.chains import Head, Link, moved
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


FAMILY = "ledger"
# Tasks whose heads one query reads: an IN list short enough for every database.
HEADS_BATCH = 500


def mark_moved(record: OperationAudit) -> None:
    """The next checkpoint must sign ``record``'s chain (``audit/chains.py``): call it in the
    transaction that inserts the record."""
    moved(FAMILY, record.task_id)


class LedgerChains:
    """The per-task audit chains, as ``manage.py audit`` reads them (``audit/chains.py``)."""

    key = FAMILY
    title = "ledger audit"
    unit = "records"

    def links(self) -> Iterator[Link]:
        # Keyset batches on (task_id, seq), which the OR form reads from that index on MariaDB.
        for record in ascending(OperationAudit.objects.all(), ("task_id", "seq")):
            try:
                relinked: str | None = entry_hash(record)
            except auditkeys.UnknownKey:
                relinked = None
            yield Link(
                record.task_id, record.id, record.seq, record.prev_hash, record.entry_hash, relinked
            )

    def heads(self, chains: Collection[str] | None) -> Iterator[Head]:
        records = OperationAudit.objects.order_by()
        if chains is None:
            yield from _newest(records)
            return
        for batch in batched(sorted(chains), HEADS_BATCH):
            yield from _newest(records.filter(task_id__in=batch))

    def declared_heads(self) -> Iterator[Head]:
        return iter(())  # a task's chain ends at its newest record; the task row names none

    def where(self, link: Link) -> str:
        return f"ledger audit of task {link.chain}, record {link.id} (seq {link.seq})"

    def chain_name(self, chain: str) -> str:
        return f"ledger audit of task {chain}"


def _newest(records: QuerySet[OperationAudit]) -> Iterator[Head]:
    """The newest record of each task among ``records``."""
    newest: dict[str, Head] = {}
    rows = records.values_list("task_id", "seq", "entry_hash")
    for task_id, seq, link in rows.iterator(chunk_size=5000):
        if task_id not in newest or newest[task_id].seq < seq:
            newest[task_id] = Head(task_id, seq, link)
    yield from newest.values()
