"""What time alone causes, found by the worker's passes and told once each (the outbox's
unique key): a decision whose outcome is still unknown after
``CONSOLE_NOTIFY_UNKNOWN_AFTER_MINUTES``; a signed ``audit verify`` that found a break; the
newest checkpoint older than its period (``ORBIT_AUDIT_CHECKPOINT_SECONDS``) plus
``CONSOLE_NOTIFY_CHECKPOINT_GRACE_SECONDS``; a task waiting past its waiting-time objective;
a namespace whose decisions have stalled (insight's objectives and stall alarm).

The audit's results are read from what the audit app records (its signed rows), and the
objectives' from what insight records (its periods of waiting, marked once told), so neither
app knows anything of notifications."""

from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import Any
from urllib.parse import urlencode

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
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
from orbit_console.insight.objectives import (
    breach_told,
    stall_alarms,
    stall_of,
    stall_over,
    stall_told,
    untold_breaches,
    waiting_in_review,
)
from orbit_console.lib.durations import format_duration
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


def objective_breaches(now: datetime) -> int:
    """Tasks waiting past their objective: each told once (the period is marked in the
    transaction that writes its notification) to the supervisors whose credential covers the
    task's queue, and to the namespace's webhooks."""
    told = 0
    supervisors: dict[tuple[str, str], list[User]] = {}
    for wait in untold_breaches(now=now):
        if wait.deadline is None:  # pragma: no cover -- only periods with a deadline are read
            continue
        place = (wait.namespace_id, wait.queue_id)
        if place not in supervisors:
            supervisors[place] = supervisors_of(wait.namespace_id, queue_id=wait.queue_id)
        with transaction.atomic():
            if not breach_told(wait=wait, now=now):
                continue  # another worker told it
            told += bool(
                notify(
                    kind="objective.breached",
                    key=f"objective.breached:{wait.id}",
                    recipients=supervisors[place],
                    namespace_id=wait.namespace_id,
                    task_id=wait.task_id,
                    facts={
                        "handler": wait.handler,
                        "waiting_since": wait.entered_at.isoformat(),
                        "deadline": wait.deadline.isoformat(),
                        "objective": format_duration(wait.deadline - wait.entered_at),
                    },
                    path=reverse("console:task", args=[wait.task_id]),
                    now=now,
                )
            )
    return told


def stalled_decisions(now: datetime) -> int:
    """Namespaces with a stall alarm where tasks have waited in review for its time with no
    decision made: each stall told once, while it lasts, to the namespace's supervisors (those
    whose credential covers every queue: a stall is the namespace's) and its webhooks."""
    told = 0
    for alarm in stall_alarms():
        stall = stall_of(alarm.namespace_id)
        if stall.since is None or stall.stalled_for(now) < alarm.after:
            if alarm.stalled_since is not None:
                stall_over(namespace_id=alarm.namespace_id)
            continue
        if alarm.stalled_since is not None:
            continue  # told while it lasts
        with transaction.atomic():
            if not stall_told(namespace_id=alarm.namespace_id, since=stall.since):
                continue
            facts = {
                "waiting": waiting_in_review(alarm.namespace_id),
                "stalled_since": stall.since.isoformat(),
                "stall_after": format_duration(alarm.after),
            }
            if stall.last_decision_at is not None:
                facts["last_decision_at"] = stall.last_decision_at.isoformat()
            query = urlencode({"namespace": alarm.namespace_id, "state": "NEEDS_REVIEW"})
            told += bool(
                notify(
                    kind="decisions.stalled",
                    key=f"decisions.stalled:{alarm.namespace_id}:{stall.since.isoformat()}",
                    recipients=supervisors_of(alarm.namespace_id),
                    namespace_id=alarm.namespace_id,
                    facts=facts,
                    path=f"{reverse('console:work_queue')}?{query}",
                    now=now,
                )
            )
    return told


def scan(now: datetime) -> int:
    return (
        unknown_outcomes(now)
        + reminders(now)
        + failed_verifications(now)
        + overdue_checkpoint(now)
        + objective_breaches(now)
        + stalled_decisions(now)
    )
