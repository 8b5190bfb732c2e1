"""What the insight figures read (docs/insight.md): plain data, each read bounded.

Times are UTC; a range is ``[start, end)``, read in steps of an hour, a day or a week (weeks
start on Monday, UTC). Every figure over a range is read from the rollups (``tallies.py``), a
row per step and key at most; what waits now from the open periods, at most
``INSIGHT_WAITING_CAP`` of them ("at least" beyond). Nothing here checks who may see what: the
caller gives the namespaces (and, for a credential limited to some queues, the queues) the
person may read (docs/access.md).
"""

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import QuerySet, Sum
from django.utils import timezone

from orbit_console.decisions.evidence import evidence_link
from orbit_console.feed.models import Source
from orbit_console.insight import sketch
from orbit_console.insight.models import (
    DAY,
    HANDLER_CHARS,
    HOUR,
    ClockTally,
    DecisionFact,
    DecisionTally,
    PrecedentTally,
    Wait,
    WaitingSample,
    WaitTally,
)
from orbit_console.insight.tallies import CLOCKS, day_of, hour_of
from orbit_console.insight.waiting import Ages, ages_at, entered_times
from orbit_console.people.accounts import company_ids

STEPS = ("hour", "day", "week")
MAX_STEPS = 5000
_WIDTH = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(days=7)}


def steps(start: datetime, end: datetime, step: str) -> list[datetime]:
    """The starts of the steps that cover ``[start, end)``: whole UTC hours, days or weeks
    (from Monday), the first holding ``start``."""
    if step not in STEPS:
        raise ValueError(f"a step is one of {', '.join(STEPS)}, not {step!r}")
    if (end - start) / _WIDTH[step] > MAX_STEPS:
        raise ValueError(f"at most {MAX_STEPS} steps: choose a longer step or a shorter range")
    moment = _step_of(start, step)
    found = []
    while moment < end:
        found.append(moment)
        moment += _WIDTH[step]
    return found


def _grain(step: str) -> str:
    return HOUR if step == "hour" else DAY


def _step_of(moment: datetime, step: str) -> datetime:
    if step == "hour":
        return hour_of(moment)
    day = day_of(moment)
    return day - timedelta(days=day.weekday()) if step == "week" else day


def _rows(model: Any, namespace_id: str, step: str, start: datetime, end: datetime) -> QuerySet:
    """A rollup's rows of one namespace whose hour or day lies in the range's steps."""
    covered = steps(start, end, step)
    if not covered:
        return model.objects.none()
    return model.objects.filter(
        namespace_id=namespace_id,
        grain=_grain(step),
        start__gte=covered[0],
        start__lt=covered[-1] + _WIDTH[step],
    )


def _in_queues(rows: QuerySet, queue_ids: Iterable[str] | None) -> QuerySet:
    return rows if queue_ids is None else rows.filter(queue_id__in=list(queue_ids))


# --- Waiting now and over time ------------------------------------------------------------------


@dataclass(frozen=True)
class WaitingNow:
    """The tasks of a namespace waiting for a person now. ``count`` is exact up to the cap;
    ``capped``: there are more ("≥ count"), and only the oldest's age is known. ``streamed``:
    Orbit's stream is consumed for the namespace (without it, only the tasks the console's own
    decisions told of are known to wait, and none is known to have stopped)."""

    namespace_id: str
    count: int
    capped: bool
    p50_ms: float | None
    p95_ms: float | None
    oldest_ms: float | None
    streamed: bool


def waiting_now(
    namespace_ids: Sequence[str],
    *,
    kinds: tuple[str, ...] = (),
    handler: str = "",
    now: datetime | None = None,
) -> list[WaitingNow]:
    """Per namespace (in the order given): how many tasks wait now and their ages (p50, p95,
    oldest, nearest-rank). ``kinds``: only periods of these kinds (``WaitKind``); ``handler``:
    only tasks of this handler."""
    now = now or timezone.now()
    streamed = set(
        Source.objects.filter(namespace_id__in=list(namespace_ids)).values_list(
            "namespace_id", flat=True
        )
    )
    found = []
    for namespace_id in namespace_ids:
        ages = ages_at(entered_times(namespace_id, kinds=kinds, handler=handler), now)
        found.append(_now(namespace_id, ages, namespace_id in streamed))
    return found


def waiting_counts(namespace_ids: Iterable[str]) -> dict[str, int]:
    """How many tasks of each namespace wait now, whole (a gauge's, where ages are not asked
    for): a count of one index range per namespace (``insight_waiting``), no row read."""
    return {
        namespace_id: Wait.objects.filter(namespace_id=namespace_id, ended_at__isnull=True).count()
        for namespace_id in namespace_ids
    }


def _now(namespace_id: str, ages: Ages, streamed: bool) -> WaitingNow:
    return WaitingNow(
        namespace_id=namespace_id,
        count=ages.count,
        capped=ages.capped,
        p50_ms=ages.p50_ms,
        p95_ms=ages.p95_ms,
        oldest_ms=ages.oldest_ms,
        streamed=streamed,
    )


@dataclass(frozen=True)
class WaitingPoint:
    """The tasks waiting at ``at``; ``known`` is false before the console kept samples of the
    namespace (then every figure is ``None``)."""

    at: datetime
    known: bool
    count: int | None = None
    capped: bool = False
    p50_ms: float | None = None
    p95_ms: float | None = None
    oldest_ms: float | None = None


def waiting_over_time(
    namespace_id: str,
    *,
    start: datetime,
    end: datetime,
    step: str = "hour",
    now: datetime | None = None,
) -> list[WaitingPoint]:
    """The tasks waiting at the start of each step of ``[start, end)`` (of each hour, day or
    week), from the hourly samples (``WaitingSample``): a step's start holds a sample, or no
    change happened between it and the next sample (or now), and the tasks then are those of
    the next sample (or of now), each younger by the time between."""
    now = now or timezone.now()
    points = [moment for moment in steps(start, end, step) if moment <= now]
    if not points:
        return []
    samples = list(
        WaitingSample.objects.filter(
            namespace_id=namespace_id, hour__gte=points[0], hour__lte=hour_of(now)
        ).order_by("hour")
    )
    first = (
        WaitingSample.objects.filter(namespace_id=namespace_id)
        .order_by("hour")
        .values_list("hour", flat=True)
        .first()
    )
    current = ages_at(entered_times(namespace_id), now)
    found = []
    following = 0
    for moment in points:
        while following < len(samples) and samples[following].hour < moment:
            following += 1
        if first is None or moment < first:
            found.append(WaitingPoint(at=moment, known=False))
            continue
        if following < len(samples):
            sample = samples[following]
            ages = Ages(
                count=sample.count,
                capped=sample.capped,
                p50_ms=_float(sample.p50_ms),
                p95_ms=_float(sample.p95_ms),
                oldest_ms=_float(sample.oldest_ms),
            )
            younger = (sample.hour - moment) / timedelta(milliseconds=1)
        else:
            ages, younger = current, (now - moment) / timedelta(milliseconds=1)
        found.append(
            WaitingPoint(
                at=moment,
                known=True,
                count=ages.count,
                capped=ages.capped,
                p50_ms=_younger(ages.p50_ms, younger),
                p95_ms=_younger(ages.p95_ms, younger),
                oldest_ms=_younger(ages.oldest_ms, younger),
            )
        )
    return found


def _float(value: int | None) -> float | None:
    return None if value is None else float(value)


def _younger(age: float | None, by: float) -> float | None:
    return None if age is None else max(age - by, 0.0)


# --- The clocks -------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClockPoint:
    """One step of a clock: how many of its durations ended in it, and their p50 and p95
    (ms, within the sketch's relative error ``sketch.ALPHA``)."""

    start: datetime
    count: int
    p50_ms: float | None
    p95_ms: float | None


@dataclass(frozen=True)
class Clock:
    name: str
    points: list[ClockPoint]
    total: ClockPoint  # the whole range, its sketches merged


def clock(
    namespace_id: str,
    name: str,
    *,
    start: datetime,
    end: datetime,
    step: str = "day",
    queue_ids: Iterable[str] | None = None,
) -> Clock:
    """One of the clocks (``tallies.CLOCKS``: waiting, deciding, approving, batch) per step of
    the range, from the steps' sketches merged."""
    if name not in CLOCKS:
        raise ValueError(f"a clock is one of {', '.join(CLOCKS)}, not {name!r}")
    covered = steps(start, end, step)
    rows = _in_queues(_rows(ClockTally, namespace_id, step, start, end), queue_ids).filter(
        clock=name
    )
    per_step: dict[datetime, dict[int, int]] = {moment: {} for moment in covered}
    for moment, bucket, n in rows.values_list("start", "bucket", "n"):
        key = _step_of(moment, step)
        if key in per_step:
            per_step[key][bucket] = per_step[key].get(bucket, 0) + n
    points = [_clock_point(moment, buckets) for moment, buckets in per_step.items()]
    total = _clock_point(covered[0] if covered else start, sketch.merged(per_step.values()))
    return Clock(name=name, points=points, total=total)


def _clock_point(moment: datetime, buckets: dict[int, int]) -> ClockPoint:
    return ClockPoint(
        start=moment,
        count=sum(buckets.values()),
        p50_ms=sketch.percentile(buckets, 0.5),
        p95_ms=sketch.percentile(buckets, 0.95),
    )


# --- Decisions --------------------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionPoint:
    """One step: how many decisions reached each (action, outcome) in it — the outcomes
    ``succeeded`` / ``failed`` (declared), ``retried``, ``refused``, ``cancelled``, the
    proposals' ``proposed``, ``approved``, ``rejected``, ``expired``, ``withdrawn``, a retry's
    new task's end ``retry_succeeded`` / ``retry_failed`` (failed again) /
    ``retry_cancelled`` / ``retry_needs_review``, and under the action ``batch`` the batches'
    steps and ``task_recovered``."""

    start: datetime
    counts: dict[tuple[str, str], int]


def decisions(
    namespace_id: str,
    *,
    start: datetime,
    end: datetime,
    step: str = "day",
    queue_ids: Iterable[str] | None = None,
) -> list[DecisionPoint]:
    covered = steps(start, end, step)
    rows = _in_queues(_rows(DecisionTally, namespace_id, step, start, end), queue_ids)
    per_step: dict[datetime, dict[tuple[str, str], int]] = {moment: {} for moment in covered}
    for moment, action, outcome, n in rows.values_list("start", "action", "outcome", "n"):
        key = _step_of(moment, step)
        if key in per_step and n:
            counts = per_step[key]
            counts[action, outcome] = counts.get((action, outcome), 0) + n
    return [DecisionPoint(start=moment, counts=counts) for moment, counts in per_step.items()]


def latest_decision_at(namespace_id: str) -> datetime | None:
    """When the namespace's latest decision was made (proposed or stored): the stall alarm's
    "no decision since"."""
    return (
        DecisionFact.objects.filter(namespace_id=namespace_id)
        .order_by("-recorded_at")
        .values_list("recorded_at", flat=True)
        .first()
    )


# --- What sends tasks to review -----------------------------------------------------------------

CAUSES = ("handler", "queue_id", "error_code")


@dataclass(frozen=True)
class Cause:
    """One handler, queue or error code: the tasks that started waiting with it in the range
    (``count``) and in the range as long before it (``previous``: the trend), and per step."""

    value: str
    count: int
    previous: int
    series: list[int]


def causes(
    namespace_id: str,
    by: str,
    *,
    start: datetime,
    end: datetime,
    step: str = "day",
    kinds: tuple[str, ...] = ("review",),
    limit: int = 10,
    queue_ids: Iterable[str] | None = None,
) -> list[Cause]:
    """The ``limit`` handlers, queues or last error codes (``by``) with the most tasks sent to
    wait for a person in the range, most first (then by name: deterministic)."""
    if by not in CAUSES:
        raise ValueError(f"causes are counted by one of {', '.join(CAUSES)}, not {by!r}")
    covered = steps(start, end, step)
    if not covered:
        return []
    width = end - start
    earlier = _in_queues(_rows(WaitTally, namespace_id, step, start - width, start), queue_ids)
    now_rows = _in_queues(_rows(WaitTally, namespace_id, step, start, end), queue_ids)
    index = {moment: position for position, moment in enumerate(covered)}
    series: dict[str, list[int]] = defaultdict(lambda: [0] * len(covered))
    for value, moment, n in (
        now_rows.filter(event="entered", kind__in=kinds).values_list(by, "start", "n").iterator()
    ):
        position = index.get(_step_of(moment, step))
        if position is not None:
            series[value][position] += n
    previous: dict[str, int] = defaultdict(int)
    for value, moment, n in (
        earlier.filter(event="entered", kind__in=kinds).values_list(by, "start", "n").iterator()
    ):
        if _step_of(moment, step) < covered[0]:
            previous[value] += n
    ranked = sorted(series.items(), key=lambda item: (-sum(item[1]), item[0]))[:limit]
    return [
        Cause(value=value, count=sum(counts), previous=previous.get(value, 0), series=counts)
        for value, counts in ranked
    ]


# --- Batches ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Batches:
    """Batches in the range: their steps counted (``selected``, ``proposed``, ``approved``,
    ``rejected``, ``expired``, ``discarded``, ``finished``, ``cancelled``), the tasks they
    recovered (applied), and how long sending took (the ``batch`` clock)."""

    counts: dict[str, int]
    tasks_recovered: int
    duration: ClockPoint


def batches(namespace_id: str, *, start: datetime, end: datetime, step: str = "day") -> Batches:
    counts: dict[str, int] = defaultdict(int)
    for point in decisions(namespace_id, start=start, end=end, step=step):
        for (action, outcome), n in point.counts.items():
            if action == "batch":
                counts[outcome] += n
    recovered = counts.pop("task_recovered", 0)
    took = clock(namespace_id, "batch", start=start, end=end, step=step).total
    return Batches(counts=dict(counts), tasks_recovered=recovered, duration=took)


# --- Precedent --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Earlier:
    """One earlier decision, as precedent shows it."""

    id: str
    task_id: str
    action: str
    outcome: str
    declared: str
    settled_at: datetime
    decided_by: str
    approved_by: str
    reason: str
    evidence_ref: str
    evidence_link: str  # the link its reference makes under the namespace's policy now
    successor_state: str
    in_batch: bool
    company: frozenset[str] = (
        frozenset()
    )  # of decided_by and approved_by, those company sign-in made


@dataclass(frozen=True)
class Precedent:
    """Earlier decisions about tasks of one handler with one last error code in a namespace,
    settled since ``since`` (``INSIGHT_PRECEDENT_DAYS`` UTC days before today's start): how
    many reached each outcome, the most useful few (evidence that links first, then the most
    recent; ties broken by id), and how the handler's retries ended (``retries``: by the new
    task's end, over all its error codes)."""

    since: datetime
    counts: dict[str, int]
    decisions: list[Earlier]
    retries: dict[str, int] = field(default_factory=dict)

    @property
    def retry_success(self) -> tuple[int, int]:
        """(succeeded, ended) of the handler's retries in the window."""
        return self.retries.get("retry_succeeded", 0), sum(self.retries.values())


def precedent_since(now: datetime | None = None) -> datetime:
    return day_of(now or timezone.now()) - timedelta(days=settings.INSIGHT_PRECEDENT_DAYS)


def precedent(
    namespace_id: str,
    handler: str,
    error_code: str,
    *,
    now: datetime | None = None,
    limit: int = 5,
    excluding: str = "",
    queue_ids: Iterable[str] | None = None,
) -> Precedent:
    """Precedent for a decision about a task of ``handler`` whose last error code is
    ``error_code``: read from the precedent rollup (counts) and two index ranges of at most
    ``limit`` rows each (``insight_precedent``): the same list for the same task, whoever
    asks, as long as no decision settles meanwhile. ``excluding``: a decision not to list (the
    proposal being approved)."""
    since = precedent_since(now)
    handler = handler[:HANDLER_CHARS]  # as the facts keep it
    queues = None if queue_ids is None else list(queue_ids)
    handlers = PrecedentTally.objects.filter(
        namespace_id=namespace_id, handler=handler, start__gte=since
    )
    if queues is not None:
        handlers = handlers.filter(queue_id__in=queues)
    # Summed in the database: a busy handler's 180 days are thousands of rows (its codes,
    # days, queues), its outcomes a dozen.
    counts = _summed(handlers.filter(error_code=error_code))
    retries = _summed(handlers.filter(action="retry", outcome__in=RETRY_ENDS))
    listed: list[DecisionFact] = []
    for links in (True, False):
        wanted = limit - len(listed)
        if wanted <= 0:
            break
        rows = DecisionFact.objects.filter(
            namespace_id=namespace_id,
            handler=handler,
            error_code=error_code,
            evidence_links=links,
            settled_at__gte=since,
        )
        if queues is not None:
            rows = rows.filter(queue_id__in=queues)
        if excluding:
            rows = rows.exclude(id=excluding)
        listed += rows.select_related("decided_by", "approved_by").order_by("-settled_at", "-id")[
            :wanted
        ]
    company = company_ids(
        user_id for fact in listed for user_id in (fact.decided_by_id, fact.approved_by_id)
    )
    return Precedent(
        since=since,
        counts=counts,
        decisions=[_earlier(fact, company) for fact in listed],
        retries=retries,
    )


RETRY_ENDS = ("retry_succeeded", "retry_failed", "retry_cancelled", "retry_needs_review")


def _summed(rows: QuerySet) -> dict[str, int]:
    """{outcome: count} of precedent rows, those that count nothing left out."""
    summed = rows.order_by().values_list("outcome").annotate(total=Sum("n"))
    return {outcome: int(total) for outcome, total in summed if total}


def _earlier(fact: DecisionFact, company: frozenset[int] = frozenset()) -> Earlier:
    assert fact.settled_at is not None  # noqa: S101 -- only settled decisions are listed
    people = (fact.decided_by, fact.approved_by)
    return Earlier(
        id=fact.id,
        task_id=fact.task_id,
        action=fact.action,
        outcome=fact.outcome,
        declared=fact.declared,
        settled_at=fact.settled_at.astimezone(UTC),
        decided_by=fact.decided_by.get_username() if fact.decided_by else "",
        approved_by=fact.approved_by.get_username() if fact.approved_by else "",
        reason=fact.reason,
        evidence_ref=fact.evidence_ref,
        evidence_link=evidence_link(fact.namespace_id, fact.evidence_ref)
        if fact.evidence_links
        else "",
        successor_state=fact.successor_state,
        in_batch=bool(fact.batch_id),
        company=frozenset(
            user.get_username() for user in people if user is not None and user.pk in company
        ),
    )


# --- Tasks waiting, one by one (objectives, the work queue's marks) -----------------------------


def waits_of(task_ids: Iterable[str]) -> dict[str, Wait]:
    """The open period of each of these tasks that waits now (one query)."""
    return {wait.task_id: wait for wait in Wait.objects.filter(open_task__in=list(task_ids))}


def past_deadline(*, now: datetime | None = None, limit: int = 1000) -> list[Wait]:
    """Tasks waiting past their deadline, the longest past first (``insight_wait_deadline``)."""
    now = now or timezone.now()
    rows = Wait.objects.filter(ended_at__isnull=True, deadline__lte=now).order_by("deadline", "id")
    return list(rows[:limit])
