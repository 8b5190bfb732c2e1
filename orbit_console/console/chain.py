"""The hash chain of the console's append-only record (``ConsoleEvent``)."""

import hashlib

from orbit_console.console.models import ChainHead, ConsoleEvent
from orbit_console.lib import strictjson
from orbit_console.lib.rfc3339 import format_utc

CONSOLE_CHAIN = "console"


def entry_hash(event: ConsoleEvent) -> str:
    content = {
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
    }
    return hashlib.sha256(strictjson.canonical(content).encode()).hexdigest()


def append(event: ConsoleEvent) -> ConsoleEvent:
    """Number, link and insert ``event`` at the chain's tail. Call inside a transaction: the
    head's row lock orders concurrent appends."""
    head = ChainHead.objects.select_for_update().get(name=CONSOLE_CHAIN)
    event.seq = head.seq + 1
    event.prev_hash = head.last_hash
    event.entry_hash = entry_hash(event)
    event.save(force_insert=True)
    head.seq = event.seq
    head.last_hash = event.entry_hash
    head.save(update_fields=["seq", "last_hash"])
    return event
