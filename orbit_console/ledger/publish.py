"""Live notifications of the embedded ledger: after a transaction commits, each new audit
record is announced to its task's group (``lib/live.py``).

This is the in-process counterpart of Orbit's event stream (I3): a notification only prompts
subscribers; what each may see is decided by their own credential.
"""

import json
from typing import Any

from orbit_console.ledger.models import OperationAudit
from orbit_console.ledger.serializers import operation_detail
from orbit_console.lib.live import OPERATION_MESSAGE, publish_on_commit, task_group


def operation_message(record: OperationAudit) -> dict[str, Any]:
    """The operation detail (AU5) as a channel-layer message: plain JSON types only (the audit's
    before/after are the ledger's own JSON, which holds no floats)."""
    detail = operation_detail(record)
    detail["before"] = json.loads(record.before)
    detail["after"] = json.loads(record.after)
    return {"type": OPERATION_MESSAGE, "operation": detail}


def announce_on_commit(record: OperationAudit) -> None:
    publish_on_commit(task_group(record.task_id), operation_message(record))
