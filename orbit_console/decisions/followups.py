"""Following every decision to its end (I2: a receipt means "stored", not "done").

An applied decision starts a ``FollowUp`` in the transaction that records its receipt: the
reviewed task (terminal at once), or the retry's new task, which is followed until it ends —
SUCCEEDED, FAILED, CANCELLED, or NEEDS_REVIEW again.

What moves a follow-up is always a fresh read of the task from the API (I3: events only prompt
a re-read), handed to ``followup_observe``: by the console's event feed when Orbit announces an
event of the task (``orbit_console/feed``), by a page that shows the follow-up, and by the
feed's bounded looking (``followups_due`` / ``followup_looked``, I4) while no live stream
covers the task's namespace. A revision never moves one backwards, so reads that arrive late or
twice change nothing. An event of a followed task that the feed could not apply (set aside:
``followups_look_soon``) has the task looked at once more, as after a receipt, whatever the
stream. When a followed task ends, the console's record says so
(``submission.followed``, on the decision's task's timeline) and the people who made and sent
the decision are told live (``person_group``).
"""

from collections.abc import Iterable
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Case, F, Q, Value, When
from django.utils import timezone

from orbit_console.client import Task
from orbit_console.decisions.models import ENDED_STATES, FollowUp, Submission
from orbit_console.decisions.submissions import record_event
from orbit_console.lib import notes
from orbit_console.lib.live import FOLLOWUP_MESSAGE, person_group, publish_on_commit

# The feed's own looks at a followed task: the first soon after the receipt (it closes the
# moment between the API's commit and the receipt, whose events came before there was anything
# to follow), then ever further apart, up to the longest pause.
FIRST_LOOK = timedelta(seconds=5)
LONGEST_PAUSE = timedelta(minutes=5)


def followup_start(submission: Submission, task: Task, *, now: datetime) -> FollowUp:
    """Start following ``task`` (the receipt's: the reviewed task, or the retry's new one) for
    the ``submission`` just applied (called once, by the transaction that applied it)."""
    ended = task.state in ENDED_STATES
    return FollowUp.objects.create(
        submission=submission,
        task_id=task.id,
        namespace_id=task.namespace_id,
        state=task.state,
        revision=int(task.revision),
        seen_at=now,
        ended_at=now if ended else None,
        next_look_at=None if ended else now + FIRST_LOOK,
        deadline=now + timedelta(hours=settings.CONSOLE_FOLLOW_HOURS),
    )


def followup_observe(task: Task, *, now: datetime | None = None) -> list[FollowUp]:
    """``task`` as the API has just answered it: every open follow-up of it that this read moves
    forward (a higher revision, before the follow-up's deadline), as it now stands."""
    now = now or timezone.now()
    with transaction.atomic():
        moved = list(
            FollowUp.objects.select_for_update()
            .select_related("submission")
            .filter(
                task_id=task.id,
                ended_at__isnull=True,
                revision__lt=int(task.revision),
                deadline__gt=now,
            )
        )
        for followup in moved:
            followup.state, followup.revision, followup.seen_at = (
                task.state,
                int(task.revision),
                now,
            )
            if task.state in ENDED_STATES:
                followup.ended_at, followup.next_look_at = now, None
            # Saved before the end is recorded: those told of the record read the follow-up
            # as it now stands (insight counts the retries that failed again).
            followup.save(
                update_fields=["state", "revision", "seen_at", "ended_at", "next_look_at"]
            )
            if followup.ended:
                record_event(
                    "submission.followed",
                    submission=followup.submission,
                    actor=None,
                    note=notes.written(
                        notes.FOLLOWED_TO_ITS_END,
                        task=task.id,
                        state=task.state,
                        revision=str(task.revision),
                    ),
                    now=now,
                )
            _tell(followup)
    return moved


def _tell(followup: FollowUp) -> None:
    submission = followup.submission
    message = {
        "type": FOLLOWUP_MESSAGE,
        "submission_id": submission.id,
        "task_id": followup.task_id,
        "state": followup.state,
        "ended": followup.ended,
    }
    for user_id in {submission.created_by_id, submission.sent_as_id}:
        publish_on_commit(person_group(user_id), message)


def followups_due(
    *, now: datetime, skip_namespaces: Iterable[str] = (), limit: int = 50
) -> list[FollowUp]:
    """Open follow-ups whose next look is due: the first look after each receipt always; later
    ones only outside ``skip_namespaces`` (those a live stream covers)."""
    skipped = list(skip_namespaces)
    due = FollowUp.objects.filter(
        ended_at__isnull=True, next_look_at__lte=now, deadline__gt=now
    ).select_related("submission")
    if skipped:
        due = due.filter(Q(looks=0) | ~Q(namespace_id__in=skipped))
    return list(due.order_by("next_look_at")[:limit])


def followups_look_soon(task_id: str, *, now: datetime) -> int:
    """The feed set an event of ``task_id`` aside (docs/events.md): the re-read that event
    prompted is owed to the task's open follow-ups all the same, so each is looked at now, as
    the first look after a receipt is (``followups_due`` takes it whether a stream is live or
    not), and then further apart again."""
    return FollowUp.objects.filter(task_id=task_id, ended_at__isnull=True, deadline__gt=now).update(
        looks=0, next_look_at=now
    )


def followup_looked(followup: FollowUp, *, now: datetime) -> None:
    """A look at the task was made (whatever it answered): the next one is further off, and
    none comes after the deadline (the page then says the task is no longer followed)."""
    looks = followup.looks + 1
    following = now + min(FIRST_LOOK * 2**looks, LONGEST_PAUSE)
    next_look = following if following < followup.deadline else None
    FollowUp.objects.filter(pk=followup.pk).update(
        looks=F("looks") + 1,
        # An ended follow-up (this look may have ended it) is looked at no more.
        next_look_at=Case(When(ended_at__isnull=True, then=Value(next_look)), default=None),
    )
