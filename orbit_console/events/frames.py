"""The event object of a stream frame (docs/events.md): what a subscriber learns of an event.

Revisions and sequences travel as strings (C5, I8). The frame says what happened and where to
read it — never the result itself: an event only prompts the subscriber to read the task and
its audit again (I3), with its own credential.
"""

import json
from typing import Any

from orbit_console.ledger.models import TaskEvent
from orbit_console.lib.rfc3339 import format_utc


def event_object(event: TaskEvent) -> dict[str, Any]:
    item: dict[str, Any] = {
        "id": event.event_id,
        "sequence": str(event.sequence),
        "type": event.kind,
        "namespace_id": event.namespace_id,
        "queue_id": event.queue_id,
        "task_id": event.task_id,
        "state": event.state,
        "revision": str(event.revision),
        "operation": event.operation,
        "audit_id": event.audit_id,
        "occurred_at": format_utc(event.created_at),
    }
    item.update(json.loads(event.detail))
    return item
