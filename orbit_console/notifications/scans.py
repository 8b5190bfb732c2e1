"""What time alone causes, found by the worker's passes and told once each (the outbox's
unique key): a decision whose outcome is still unknown after
``CONSOLE_NOTIFY_UNKNOWN_AFTER_MINUTES``; a signed ``audit verify`` that found a break; the
newest checkpoint older than its period (``ORBIT_AUDIT_CHECKPOINT_SECONDS``) plus
``CONSOLE_NOTIFY_CHECKPOINT_GRACE_SECONDS``.

The audit's results are read from what the audit app records (its signed rows), so the audit
app knows nothing of notifications."""

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.urls import reverse

from orbit_console.audit import status
from orbit_console.audit.models import ChainVerification, WrittenCheckpoint
from orbit_console.decisions.models import (
    Batch,
    BatchState,
    Proposal,
    ProposalState,
    Submission,
    SubmissionState,
)
from orbit_console.notifications.models import Notification
from orbit_console.notifications.outbox import auditors, notify, supervisors_of

LOOK_BACK = 20


def unknown_outcomes(now: datetime) -> int:
    after = timedelta(minutes=settings.CONSOLE_NOTIFY_UNKNOWN_AFTER_MINUTES)
    told = 0
    stale = Submission.objects.filter(
        state=SubmissionState.UNKNOWN, created_at__lte=now - after
    ).select_related("created_by")
    keys = {f"submission.unknown:{s.id}" for s in stale}
    known = set(Notification.objects.filter(key__in=keys).values_list("key", flat=True))
    for submission in stale:
        if f"submission.unknown:{submission.id}" in known:
            continue
        minutes = int((now - submission.created_at).total_seconds() // 60)
        told += bool(
            notify(
                kind="submission.unknown",
                key=f"submission.unknown:{submission.id}",
                recipients=[
                    submission.created_by,
                    *supervisors_of(submission.namespace_id, queue_id=submission.queue_id),
                ],
                namespace_id=submission.namespace_id,
                task_id=submission.task_id,
                submission_id=submission.id,
                facts={"action": submission.action, "state": submission.state, "minutes": minutes},
                path=reverse("console:submission", args=[submission.id]),
                now=now,
            )
        )
    return told


def failed_verifications(now: datetime) -> int:
    told = 0
    rows = ChainVerification.objects.filter(ok=False).order_by("-ran_at", "-id")[:LOOK_BACK]
    for row in rows:
        key = f"audit.verify_failed:{row.id}"
        if Notification.objects.filter(key=key).exists():
            continue
        said = status.verified(row)
        if said is None:  # not signed by the checkpoint job's key: proves nothing
            continue
        told += bool(
            notify(
                kind="audit.verify_failed",
                key=key,
                recipients=auditors(),
                facts={
                    "ran_at": said.ran_at.isoformat(),
                    "problems": said.problems,
                    "first_break": said.first_break[:200],
                },
                path=reverse("console:audit"),
                now=now,
            )
        )
    return told


def overdue_checkpoint(now: datetime) -> int:
    newest = WrittenCheckpoint.objects.order_by("-taken_at", "-number").first()
    if newest is None:  # no checkpoint job has ever run here: nothing is overdue
        return 0
    allowed = timedelta(
        seconds=settings.ORBIT_AUDIT_CHECKPOINT_SECONDS
        + settings.CONSOLE_NOTIFY_CHECKPOINT_GRACE_SECONDS
    )
    if newest.taken_at > now - allowed:
        return 0
    key = f"audit.checkpoint_overdue:{newest.series}:{newest.number}"
    if Notification.objects.filter(key=key).exists():
        return 0
    return bool(
        notify(
            kind="audit.checkpoint_overdue",
            key=key,
            recipients=auditors(),
            facts={"last_checkpoint_at": newest.taken_at.isoformat(), "number": newest.number},
            path=reverse("console:audit"),
            now=now,
        )
    )


def reminders(now: datetime) -> int:
    """Proposals and batches that expire within ``CONSOLE_PROPOSAL_REMINDER_MINUTES``: their
    supervisors are reminded once."""
    soon = now + timedelta(minutes=settings.CONSOLE_PROPOSAL_REMINDER_MINUTES)
    told = 0
    proposals = Proposal.objects.filter(
        state=ProposalState.PENDING, expires_at__gt=now, expires_at__lte=soon
    )
    for proposal in proposals:
        told += _remind(
            "proposal",
            proposal.id,
            supervisors=partial(supervisors_of, proposal.namespace_id, queue_id=proposal.queue_id),
            author_id=proposal.proposed_by_id,
            facts={"action": proposal.action, "expires_at": proposal.expires_at.isoformat()},
            path=reverse("console:proposal", args=[proposal.id]),
            now=now,
            namespace_id=proposal.namespace_id,
            task_id=proposal.task_id,
            proposal_id=proposal.id,
        )
    batches = Batch.objects.filter(
        state=BatchState.PROPOSED, expires_at__gt=now, expires_at__lte=soon
    )
    for batch in batches:
        if batch.expires_at is None:
            continue
        told += _remind(
            "batch",
            batch.id,
            supervisors=partial(supervisors_of, batch.namespace_id, batch=batch),
            author_id=batch.created_by_id,
            facts={"action": batch.action, "expires_at": batch.expires_at.isoformat()},
            path=reverse("console:batch", args=[batch.id]),
            now=now,
            namespace_id=batch.namespace_id,
            batch_id=batch.id,
        )
    return told


def _remind(
    what: str,
    pk: str,
    *,
    supervisors: Callable[[], list[User]],
    author_id: int | None,
    **notification: Any,
) -> bool:
    """Remind the supervisors (but its author) of a proposal or batch (``what``) once that it
    expires soon; whether they were told now."""
    key = f"{what}.reminder:{pk}"
    if Notification.objects.filter(key=key).exists():
        return False
    recipients = [u for u in supervisors() if u.pk != author_id]
    return bool(notify(kind=f"{what}.reminder", key=key, recipients=recipients, **notification))


def scan(now: datetime) -> int:
    return (
        unknown_outcomes(now) + reminders(now) + failed_verifications(now) + overdue_checkpoint(now)
    )
