"""The reconciler: the background half of durable submissions (C9, I4).

Each pass resends every open submission whose next attempt is due — ``unknown`` ones after a
bounded backoff, ``retry_later`` ones after the API's hint, ``pending`` ones a crash left
behind — stops resending those past their deadline (a person decides then), and expires
proposals and batches nobody approved in time. ``manage.py reconcile`` runs passes as a service.
"""

import logging
from datetime import datetime

from asgiref.sync import sync_to_async
from django.db import transaction
from django.utils import timezone

from orbit_console.decisions.batches import batches_expire_due
from orbit_console.decisions.models import OPEN_STATES, Submission
from orbit_console.decisions.proposals import expire_due
from orbit_console.decisions.submissions import record_event, submission_send
from orbit_console.lib import notes

logger = logging.getLogger("orbit.console.reconciler")


def due_submissions(now: datetime, *, limit: int = 50) -> list[Submission]:
    """Open submissions whose next attempt is due and whose deadline has not passed; a
    batch's are its worker's (decisions/batchworker.py)."""
    return list(
        Submission.objects.filter(
            state__in=OPEN_STATES,
            next_attempt_at__lte=now,
            reconcile_deadline__gt=now,
            batch_item__isnull=True,
        ).order_by("next_attempt_at")[:limit]
    )


def abandon_overdue(now: datetime) -> int:
    """Stop resending submissions past their deadline; they stay open for a person to decide."""
    overdue = list(
        Submission.objects.filter(
            state__in=OPEN_STATES, next_attempt_at__isnull=False, reconcile_deadline__lte=now
        )
    )
    for submission in overdue:
        with transaction.atomic():
            updated = Submission.objects.filter(id=submission.id, next_attempt_at__isnull=False)
            if updated.update(next_attempt_at=None):
                record_event(
                    "submission.reconcile_stopped",
                    submission=submission,
                    actor=None,
                    note=notes.written(notes.RECONCILER_STOPPED),
                    now=now,
                )
    return len(overdue)


async def reconcile_once(*, now: datetime | None = None) -> int:
    """One pass of the reconciler: resend every due submission once. Returns how many."""
    now = now or timezone.now()
    await sync_to_async(expire_due)(now)
    await sync_to_async(batches_expire_due)(now)
    await sync_to_async(abandon_overdue)(now)
    due = await sync_to_async(due_submissions)(now)
    for submission in due:
        try:
            await submission_send(submission, actor=None)
        except Exception:
            logger.exception("reconciling submission %s failed", submission.id)
    return len(due)
