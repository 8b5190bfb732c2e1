"""The hash chain of the console's append-only record (``ConsoleEvent``)."""

from collections.abc import Collection, Iterator

from orbit_console.audit.chains import Head, Link, moved
from orbit_console.decisions.models import ChainHead, ConsoleEvent
from orbit_console.lib import auditkeys, strictjson
from orbit_console.lib.keyset import ascending
from orbit_console.lib.rfc3339 import format_utc
from orbit_console.lib.rows import Rows

CONSOLE_CHAIN = "console"
FAMILY = "console"


def entry_hash(event: ConsoleEvent) -> str:
    """The entry's link: an HMAC of its canonical content (its key id included) under the key
    it names (``lib/auditkeys.py``)."""
    content: dict[str, object] = {
        "key_id": event.key_id,
        "id": event.id,
        "seq": event.seq,
        "kind": event.kind,
        "task_id": event.task_id,
        "queue_id": event.queue_id,
        "submission_id": event.submission_id or "",
        "proposal_id": event.proposal_id or "",
        "actor_id": event.actor_id or 0,
        "note": event.note,
        "created_at": format_utc(event.created_at),
        "prev_hash": event.prev_hash,
        "namespace_id": event.namespace_id,
    }
    if event.batch_id:  # entries from before batches keep their links
        content["batch_id"] = event.batch_id
    if event.authenticated_at is not None:  # so do those from before step-up
        content["authenticated_how"] = event.authenticated_how
        content["authenticated_at"] = format_utc(event.authenticated_at)
    return auditkeys.link(event.key_id, strictjson.canonical(content).encode())


_HEADS = Rows(ChainHead)
_EVENTS = Rows(ConsoleEvent)


def append(event: ConsoleEvent) -> ConsoleEvent:
    """Number, link and insert ``event`` at the chain's tail. Call inside a transaction: the
    head's row lock orders concurrent appends. (Plain SQL, lib/rows.py: a decision appends
    three entries on its way to the receipt.)"""
    head = _HEADS.one("name = %s", [CONSOLE_CHAIN], for_update=True)
    if head is None:
        raise ChainHead.DoesNotExist(f"the chain head {CONSOLE_CHAIN!r} is missing")
    event.seq = head.seq + 1
    event.prev_hash = head.last_hash
    event.key_id = auditkeys.current_key_id()
    event.entry_hash = entry_hash(event)
    _EVENTS.insert(event)
    moved(FAMILY, CONSOLE_CHAIN)  # the next checkpoint signs this entry, whatever its time
    head.seq = event.seq
    head.last_hash = event.entry_hash
    _HEADS.update(head, ["seq", "last_hash"])
    return event


class ConsoleChain:
    """The console's one chain, as ``manage.py audit`` reads it (``audit/chains.py``)."""

    key = FAMILY
    title = "console record"
    unit = "entries"

    def links(self) -> Iterator[Link]:
        for event in ascending(ConsoleEvent.objects.all(), ("seq",)):
            try:
                relinked: str | None = entry_hash(event)
            except auditkeys.UnknownKey:
                relinked = None
            yield Link(
                CONSOLE_CHAIN, event.id, event.seq, event.prev_hash, event.entry_hash, relinked
            )

    def heads(self, chains: Collection[str] | None) -> Iterator[Head]:
        if chains is not None and CONSOLE_CHAIN not in chains:
            return
        row = ConsoleEvent.objects.order_by("-seq").values_list("seq", "entry_hash").first()
        if row is not None:
            yield Head(CONSOLE_CHAIN, row[0], row[1])

    def declared_heads(self) -> Iterator[Head]:
        for head in ChainHead.objects.filter(name=CONSOLE_CHAIN):
            yield Head(CONSOLE_CHAIN, head.seq, head.last_hash)

    def where(self, link: Link) -> str:
        return f"console record, entry {link.id} (seq {link.seq})"

    def chain_name(self, chain: str) -> str:
        return "console record"
