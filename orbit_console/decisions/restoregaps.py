"""After a restore from backup (issue 34): the decisions the recovery API applied since the
backup was taken of which the restored console has no record.

The console's record of an applied decision is its submission with the API's receipt, whose
``audit_id`` names the audit record the API wrote for it (RV7, RT9). The API keeps those
records whatever happened to the console's database: so every ``task.review`` and
``task.retry`` record the API wrote since the backup's time, read through the audit queries
(AU2), whose id no submission of this console holds, is a decision applied without the
console's record of it — made after the backup, or by another client of the API than this
console. Read with a token that holds ``tasks:read`` and ``tasks:audit:read`` in the
namespace; only what it may see is listed.
"""

from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime

from asgiref.sync import sync_to_async

from orbit_console.client import OrbitClient
from orbit_console.client.types import Operation
from orbit_console.decisions.models import Submission

DECISIONS = ("task.review", "task.retry")
PAGE = 100


@dataclass(frozen=True)
class Missing:
    task_id: str
    action: str
    audit_id: str
    actor_id: str
    created_at: datetime


async def applied_since(orbit: OrbitClient, since: datetime) -> AsyncIterator[Operation]:
    """Every review and retry the API recorded at or after ``since``: on each task updated
    since (a review moves its task), and on the source of each successor among them (a retry
    is recorded on its source, which it leaves as it was, and creates the successor, RT9)."""
    scanned: set[str] = set()
    cursor: str | None = None
    while True:
        tasks = await orbit.list_tasks(updated_after=since, limit=PAGE, cursor=cursor)
        for summary in tasks.items:
            source = (await orbit.get_task(summary.id)).retry_of
            for task_id in (summary.id, source):
                if task_id and task_id not in scanned:
                    scanned.add(task_id)
                    async for operation in _decisions(orbit, task_id, since):
                        yield operation
        cursor = tasks.next_cursor
        if cursor is None:
            return


async def _decisions(orbit: OrbitClient, task_id: str, since: datetime) -> AsyncIterator[Operation]:
    cursor: str | None = None
    while True:
        page = await orbit.list_task_operations(task_id, limit=PAGE, cursor=cursor)
        for operation in page.items:  # newest first (AU3)
            if operation.created_at < since:
                return
            if operation.action in DECISIONS:
                yield operation
        cursor = page.next_cursor
        if cursor is None:
            return


async def missing_since(orbit: OrbitClient, since: datetime) -> tuple[int, list[Missing]]:
    """How many decisions the API applied since ``since``, and those this console lacks."""
    applied = [operation async for operation in applied_since(orbit, since)]
    known = await sync_to_async(_known)([operation.id for operation in applied])
    missing = [
        Missing(o.task_id, o.action, o.id, o.actor_id, o.created_at)
        for o in applied
        if o.id not in known
    ]
    missing.sort(key=lambda m: (m.created_at, m.audit_id))
    return len(applied), missing


def _known(audit_ids: list[str]) -> set[str]:
    found: set[str] = set()
    for start in range(0, len(audit_ids), 500):
        batch = audit_ids[start : start + 500]
        found.update(
            Submission.objects.filter(audit_id__in=batch).values_list("audit_id", flat=True)
        )
    return found
