"""The hash chain of the console's append-only record (``ConsoleEvent``)."""

from orbit_console.console.models import ChainHead, ConsoleEvent
from orbit_console.lib import auditkeys, strictjson
from orbit_console.lib.keyset import ascending
from orbit_console.lib.rfc3339 import format_utc

CONSOLE_CHAIN = "console"


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
    return auditkeys.link(event.key_id, strictjson.canonical(content).encode())


def append(event: ConsoleEvent) -> ConsoleEvent:
    """Number, link and insert ``event`` at the chain's tail. Call inside a transaction: the
    head's row lock orders concurrent appends."""
    head = ChainHead.objects.select_for_update().get(name=CONSOLE_CHAIN)
    event.seq = head.seq + 1
    event.prev_hash = head.last_hash
    event.key_id = auditkeys.current_key_id()
    event.entry_hash = entry_hash(event)
    event.save(force_insert=True)
    head.seq = event.seq
    head.last_hash = event.entry_hash
    head.save(update_fields=["seq", "last_hash"])
    return event


def verify() -> tuple[int, str | None]:
    """Walk the console's chain from its first entry to its head; return how many entries were
    checked and a description of the first break (``None`` when intact)."""
    checked = 0
    expected_seq, previous = 1, ""
    for event in ascending(ConsoleEvent.objects.all(), ("seq",)):
        checked += 1
        where = f"console record, entry {event.id} (seq {event.seq})"
        if event.seq != expected_seq:
            return checked, f"{where}: expected seq {expected_seq}; an entry is missing"
        if event.prev_hash != previous:
            return checked, f"{where}: does not link to the entry before it"
        try:
            linked = entry_hash(event)
        except auditkeys.UnknownKey:
            return checked, f"{where}: names an audit key this installation does not hold"
        if linked != event.entry_hash:
            return checked, f"{where}: its content does not match its hash; it was changed"
        expected_seq, previous = expected_seq + 1, event.entry_hash
    head = ChainHead.objects.filter(name=CONSOLE_CHAIN).first()
    if head is not None and (head.seq, head.last_hash) != (expected_seq - 1, previous):
        return checked, (
            f"console record: the chain ends at seq {expected_seq - 1} but its head says "
            f"{head.seq}; entries at the end were removed"
        )
    return checked, None
