"""Waiting-time objectives and the stall alarm (issue 43; docs/insight.md, "Objectives").

An **objective** says within how long a task parked in NEEDS_REVIEW should have a decision
started: per namespace, and optionally per handler (``Objective``; a handler's before its
namespace's). Its deadline is stored on the task's period of waiting when the period opens
(``deadline_for``, registered with ``waiting.decide_deadlines_with``), so that what fires while
tasks wait is one indexed read of the deadlines passed. Changing an objective gives the tasks
waiting now the deadline it makes (``objective_set``, ``objective_clear``); periods that ended
keep theirs: a decision is judged by the objective of its time.

A period **breaches** its objective when its deadline passes with no decision started by then
(a wizard opened, a batch selected: the waiting clock's end). The notifications' scan finds
the breaches not yet told (``untold_breaches``) and tells each once (``breach_told`` marks the
period, in the transaction that writes the notification). The work queue marks the rows past
their deadline, and those near it (``queue_marks``).

The **stall alarm** of a namespace (``StallAlarm``) goes off when tasks wait in NEEDS_REVIEW and
no decision has been made there for its time: since the latest decision, or since the oldest of
those tasks entered review if that is later (``stall_of``). Each stall is told once, while it
lasts (``stall_told``, ``stall_over``).

FAILED and CANCELLED tasks that could be retried wait for a person too (the insight figures
count them), but most are never retried: objectives and the stall alarm look at tasks in
NEEDS_REVIEW only.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import DateTimeField, ExpressionWrapper, F, Q, QuerySet
from django.utils import timezone

from orbit_console.insight import metrics, selectors
from orbit_console.insight.models import (
    HANDLER_CHARS,
    Objective,
    StallAlarm,
    Wait,
    WaitKind,
    WaitTally,
)
from orbit_console.insight.selectors import latest_decision_at, waits_of
from orbit_console.insight.waiting import changed, wait_deadline_set
from orbit_console.lib.durations import LONGEST, SHORTEST, format_duration

# A row of the work queue is marked near its deadline in the last fifth of its objective (the
# last 48 minutes of 4 hours).
NEAR = 5


class ObjectiveRefused(ValueError):
    """An objective or a stall alarm that cannot be set; the message says why."""


def _check(duration: timedelta, what: str) -> None:
    if not SHORTEST <= duration <= LONGEST:
        raise ObjectiveRefused(
            f"{what} is {format_duration(duration)}: it must be between "
            f"{format_duration(SHORTEST)} and {format_duration(LONGEST)}"
        )


# --- Deadlines --------------------------------------------------------------------------------


def objective_for(namespace_id: str, handler: str) -> Objective | None:
    """The objective that applies to a task of ``handler``: the handler's, else the namespace's."""
    found = list(Objective.objects.filter(namespace_id=namespace_id, handler__in={handler, ""}))
    return min(found, key=lambda objective: objective.handler == "", default=None)


def deadline_for(wait: Wait) -> datetime | None:
    """The deadline of a period when it opens: when it entered review plus the objective that
    applies (none for a task waiting for a retry)."""
    if wait.kind != WaitKind.REVIEW:
        return None
    objective = objective_for(wait.namespace_id, wait.handler)
    return wait.entered_at + objective.decide_within if objective is not None else None


@dataclass(frozen=True)
class Rescheduled:
    """What an objective's change did to the tasks waiting now: how many got the deadline it
    makes (or lost theirs), and how many of those are past it already (the notifier tells
    them)."""

    waiting: int
    past: int


def _open_reviews(namespace_id: str) -> QuerySet[Wait]:
    return Wait.objects.filter(
        namespace_id=namespace_id, ended_at__isnull=True, kind=WaitKind.REVIEW
    )


def _past(rows: QuerySet[Wait], now: datetime) -> QuerySet[Wait]:
    """Periods past their deadline with no decision started by it."""
    return rows.filter(deadline__lte=now).filter(
        Q(first_started_at__isnull=True) | Q(first_started_at__gt=F("deadline"))
    )


def _reschedule(namespace_id: str, handler: str, now: datetime) -> Rescheduled:
    """Give the tasks waiting in review now that the objective of ``handler`` (``""``: the
    namespace's) covers the deadline the objectives make: of that handler, or of every handler
    without an objective of its own."""
    scope = _open_reviews(namespace_id)
    if handler:
        scope = scope.filter(handler=handler)
    else:
        own = Objective.objects.filter(namespace_id=namespace_id).exclude(handler="")
        scope = scope.exclude(handler__in=own.values("handler"))
    objective = objective_for(namespace_id, handler)
    within = objective.decide_within if objective is not None else None
    # A period without a decision counts nothing against its deadline: one statement moves them
    # all. One whose decision started (its receipt not yet in) is counted in time or late: its
    # counts move with its deadline (``wait_deadline_set``).
    scope.filter(first_started_at__isnull=True).update(
        deadline=ExpressionWrapper(F("entered_at") + within, output_field=DateTimeField())
        if within is not None
        else None
    )
    started = scope.filter(first_started_at__isnull=False).values_list("id", "entered_at")
    for wait_id, entered_at in started:
        wait_deadline_set(wait_id=wait_id, deadline=entered_at + within if within else None)
    changed(namespace_id)
    return Rescheduled(waiting=scope.count(), past=_past(scope, now).count())


def objective_set(
    *, namespace_id: str, handler: str = "", decide_within: timedelta, now: datetime | None = None
) -> tuple[Objective, Rescheduled]:
    """Set the namespace's objective (or its handler's): tasks waiting in review now get the
    deadline it makes, those parked later when they are parked."""
    _check(decide_within, "an objective")
    if len(handler) > HANDLER_CHARS:
        raise ObjectiveRefused(f"a handler is at most {HANDLER_CHARS} characters")
    now = now or timezone.now()
    with transaction.atomic():
        objective, _ = Objective.objects.update_or_create(
            namespace_id=namespace_id,
            handler=handler,
            defaults={"decide_within": decide_within, "updated_at": now},
        )
        return objective, _reschedule(namespace_id, handler, now)


def objective_clear(
    *, namespace_id: str, handler: str = "", now: datetime | None = None
) -> Rescheduled | None:
    """Remove the namespace's objective (or its handler's): tasks waiting now under it get the
    namespace's deadline (a handler's removed) or none. ``None``: there was none."""
    now = now or timezone.now()
    with transaction.atomic():
        removed, _ = Objective.objects.filter(namespace_id=namespace_id, handler=handler).delete()
        if not removed:
            return None
        return _reschedule(namespace_id, handler, now)


def objectives(namespace_ids: Iterable[str] | None = None) -> list[Objective]:
    """The objectives (of these namespaces), by namespace, the namespace's before its handlers'."""
    rows = Objective.objects.order_by("namespace_id", "handler")
    if namespace_ids is not None:
        rows = rows.filter(namespace_id__in=list(namespace_ids))
    return list(rows)


# --- The stall alarm --------------------------------------------------------------------------


def stall_alarm_set(
    *, namespace_id: str, after: timedelta, now: datetime | None = None
) -> StallAlarm:
    """Set the namespace's stall alarm: told, and alerted on, once tasks have waited in review
    for ``after`` with no decision made in the namespace."""
    _check(after, "a stall alarm")
    alarm, _ = StallAlarm.objects.update_or_create(
        namespace_id=namespace_id, defaults={"after": after, "updated_at": now or timezone.now()}
    )
    return alarm


def stall_alarm_clear(*, namespace_id: str) -> bool:
    removed, _ = StallAlarm.objects.filter(namespace_id=namespace_id).delete()
    return bool(removed)


def stall_alarms(namespace_ids: Iterable[str] | None = None) -> list[StallAlarm]:
    rows = StallAlarm.objects.order_by("namespace_id")
    if namespace_ids is not None:
        rows = rows.filter(namespace_id__in=list(namespace_ids))
    return list(rows)


@dataclass(frozen=True)
class Stall:
    """A namespace as the stall alarm sees it: ``since`` no decision has been made while tasks
    wait in review (``None``: none waits), and its latest decision."""

    namespace_id: str
    since: datetime | None
    last_decision_at: datetime | None

    def stalled_for(self, now: datetime) -> timedelta:
        return max(now - self.since, timedelta(0)) if self.since is not None else timedelta(0)


def stall_of(namespace_id: str) -> Stall:
    """Two index reads: the oldest task waiting in review (``insight_waiting``) and the latest
    decision (``insight_latest_decision``)."""
    oldest = (
        _open_reviews(namespace_id).order_by("entered_at").values_list("entered_at", flat=True)
    ).first()
    latest = latest_decision_at(namespace_id)
    if oldest is None:
        return Stall(namespace_id, None, latest)
    return Stall(namespace_id, max(oldest, latest) if latest else oldest, latest)


def waiting_in_review(namespace_id: str) -> int:
    return _open_reviews(namespace_id).count()


def stall_told(*, namespace_id: str, since: datetime) -> bool:
    """The stall that began ``since`` is told: whether this call is the one that marked it (a
    stall is told once while it lasts)."""
    return bool(
        StallAlarm.objects.filter(namespace_id=namespace_id, stalled_since__isnull=True).update(
            stalled_since=since
        )
    )


def stall_over(*, namespace_id: str) -> None:
    """The namespace's stall is over (a decision was made, or nothing waits): the next is told."""
    StallAlarm.objects.filter(namespace_id=namespace_id, stalled_since__isnull=False).update(
        stalled_since=None
    )


# --- Breaches ---------------------------------------------------------------------------------


def untold_breaches(*, now: datetime, limit: int = 500) -> list[Wait]:
    """Tasks waiting past their deadline with no decision started by it, not yet told: the
    longest past first (``insight_wait_untold``)."""
    rows = Wait.objects.filter(ended_at__isnull=True, breached_at__isnull=True)
    return list(_past(rows, now).order_by("deadline", "id")[:limit])


def breach_told(*, wait: Wait, now: datetime) -> bool:
    """Mark the period told to have waited past its deadline, in the caller's transaction (the
    one that writes the notification): whether this call is the one that marked it. Counted
    (``orbit_objective_breaches_total``) once committed."""
    marked = Wait.objects.filter(id=wait.id, breached_at__isnull=True).update(breached_at=now)
    if marked:
        transaction.on_commit(lambda: metrics.breach_counted(wait.namespace_id))
    return bool(marked)


def waiting_past_objective(namespace_ids: Iterable[str]) -> dict[str, int]:
    """How many tasks of each namespace wait past their deadline now (one index range over the
    deadlines passed, ``insight_wait_deadline``)."""
    rows = _past(Wait.objects.filter(ended_at__isnull=True), timezone.now()).filter(
        namespace_id__in=list(namespace_ids)
    )
    found = dict.fromkeys(namespace_ids, 0)
    for namespace_id in rows.values_list("namespace_id", flat=True):
        found[namespace_id] = found.get(namespace_id, 0) + 1
    return found


# --- The work queue's marks -------------------------------------------------------------------


@dataclass(frozen=True)
class QueueMark:
    """A row of the work queue waiting past its deadline (``past``) or near it."""

    past: bool
    deadline: datetime
    decide_within: timedelta
    template: str = "insight/partials/queue_mark.html"

    @property
    def objective(self) -> str:
        return format_duration(self.decide_within)


def queue_marks(task_ids: Iterable[str], *, now: datetime | None = None) -> dict[str, QueueMark]:
    """The marks of the rows shown (one query, ``waits_of``): past the deadline with no decision
    started by it; or near it (its last fifth) with none started yet."""
    now = now or timezone.now()
    found = {}
    for task_id, wait in waits_of(task_ids).items():
        deadline = wait.deadline
        if deadline is None or wait.kind != WaitKind.REVIEW:
            continue
        started = wait.first_started_at
        if started is not None and started <= deadline:
            continue  # decided in time: someone is on it
        within = deadline - wait.entered_at
        if now >= deadline:
            found[task_id] = QueueMark(True, deadline, within)
        elif started is None and deadline - now <= within / NEAR:
            found[task_id] = QueueMark(False, deadline, within)
    return found


# --- The share decided within the objective ---------------------------------------------------


@dataclass(frozen=True)
class SharePoint:
    """One step: how many tasks with a deadline had their first decision started by it
    (``in_time``) and after it (``late``), counted when the decision started."""

    start: datetime
    in_time: int
    late: int

    @property
    def share(self) -> float | None:
        """The share decided in time (``None``: no decision with a deadline in the step)."""
        total = self.in_time + self.late
        return self.in_time / total if total else None


@dataclass(frozen=True)
class ObjectiveShare:
    points: list[SharePoint]
    total: SharePoint  # the whole range


def objective_share(
    namespace_id: str,
    *,
    start: datetime,
    end: datetime,
    step: str = "day",
    handler: str = "",
    queue_ids: Iterable[str] | None = None,
) -> ObjectiveShare:
    """The share of tasks decided within their objective, per step of ``[start, end)`` and in
    all, from the ``WaitTally`` rows ``decided_in_time`` and ``decided_late`` (of ``handler``
    only, when given; of these queues only, for a credential limited to some)."""
    covered = selectors.steps(start, end, step)
    per_step = {moment: [0, 0] for moment in covered}
    rows = selectors._rows(WaitTally, namespace_id, step, start, end).filter(
        event__in=("decided_in_time", "decided_late")
    )
    if handler:
        rows = rows.filter(handler=handler)
    for moment, event, n in selectors._in_queues(rows, queue_ids).values_list(
        "start", "event", "n"
    ):
        counts = per_step.get(selectors._step_of(moment, step))
        if counts is not None:
            counts[event == "decided_late"] += n
    points = [SharePoint(moment, in_time, late) for moment, (in_time, late) in per_step.items()]
    total = SharePoint(
        covered[0] if covered else start,
        sum(point.in_time for point in points),
        sum(point.late for point in points),
    )
    return ObjectiveShare(points=points, total=total)
