"""Tasks waiting for a person (docs/insight.md): each period a task waits is a ``Wait``, opened
and ended in the transaction of what tells it, with its rollups (``tallies.py``):

- Orbit's event stream, which the console's feed consumes (``on_event``, registered with
  ``feed.consumer.listen_to_events``): ``task.needs_review`` opens one (entered at the event's
  time); ``task.completed`` ends it (reviewed, or moved on otherwise) and, for a task that
  ended FAILED or CANCELLED by execution or cancellation with a retry possible, opens one;
  ``task.accepted`` with ``retry_of`` ends the source's (retried). The task is read again with
  the feed's credential (I3) for its handler, whether it may be retried, and, with its newest
  attempt, its last error code; a task that moved on since the event was written is recorded
  as having waited, and ended, rather than left waiting;
- the backfill (``backfill``): before the first event of a subscription, a bounded look at the
  tasks already in NEEDS_REVIEW;
- the console's own decisions (``recording.py``): a decision about a task the stream has not
  told of opens its period from what the decider saw, marks the first decision's start, and
  its receipt ends it.

Every way in is idempotent: a period is one row per task and revision, an event delivered again
finds it as it left it, and ending an ended period changes nothing.

The tasks waiting at each hour are sampled at the hour's first change, before it
(``WaitingSample``). A period's ``deadline`` comes from the rules registered with
``decide_deadlines_with`` when it opens, or from ``wait_deadline_set``.
"""

import logging
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils import timezone

from orbit_console.client import Attempt, OrbitClient, OrbitError, OutcomeUnknown, Task
from orbit_console.client.errors import BadAnswer
from orbit_console.client.events import StreamEvent
from orbit_console.feed.consumer import Reads
from orbit_console.feed.models import Source
from orbit_console.insight import sketch, tallies
from orbit_console.insight.models import (
    HANDLER_CHARS,
    Backfill,
    Wait,
    WaitEnd,
    WaitingSample,
    WaitKind,
    WaitOrigin,
)
from orbit_console.lib.errorcodes import error_code
from orbit_console.lib.live import publish
from orbit_console.lib.rows import Rows

logger = logging.getLogger("orbit.insight")

INSIGHT_MESSAGE = "insight.changed"


def insight_group(namespace_id: str) -> str:
    """The channel-layer group told (once committed) whenever a namespace's figures moved."""
    return f"orbit.insight.{namespace_id}"


def changed(namespace_id: str) -> None:
    """Tell the namespace's group once the transaction commits — once per transaction, however
    many facts it moved (a batch's chunk moves hundreds)."""
    connection = transaction.get_connection()
    if not connection.in_atomic_block:
        transaction.on_commit(_Announce(namespace_id))
        return
    # The callbacks Django holds for this transaction: a list replaced when the transaction
    # (or a savepoint, dropping its callbacks) ends. Ours are remembered with the list they were
    # added to, so that a transaction moving hundreds of facts does not look through them all.
    hooks = connection.run_on_commit
    marks: tuple[list[Any] | None, set[str]] = getattr(connection, "_insight_told", (None, set()))
    held, told = marks
    if held is not hooks:
        told = {
            callback.namespace_id for _, callback, _ in hooks if isinstance(callback, _Announce)
        }
        connection._insight_told = (hooks, told)  # type: ignore[attr-defined]
    if namespace_id not in told:
        transaction.on_commit(_Announce(namespace_id))
        told.add(namespace_id)


class _Announce:
    def __init__(self, namespace_id: str) -> None:
        self.namespace_id = namespace_id

    def __call__(self) -> None:
        publish(
            insight_group(self.namespace_id),
            {"type": INSIGHT_MESSAGE, "namespace_id": self.namespace_id},
        )


# --- Deadlines (waiting-time objectives) ---------------------------------------------------

DeadlineRule = Callable[[Wait], datetime | None]
_deadline_rules: list[DeadlineRule] = []


def decide_deadlines_with(rule: DeadlineRule) -> None:
    """Register a rule that gives a period its deadline when it opens (the first rule that
    answers wins); none is registered yet: every deadline is empty."""
    if rule not in _deadline_rules:
        _deadline_rules.append(rule)


def _deadline_for(wait: Wait) -> datetime | None:
    for rule in _deadline_rules:
        found = rule(wait)
        if found is not None:
            return found
    return None


def wait_deadline_set(*, wait_id: int, deadline: datetime | None) -> Wait:
    """Give an open or ended period another deadline (an objective changed): its counts of
    decisions in time and late move with it."""
    with transaction.atomic():
        wait = WAITS.one("id = %s", [wait_id], for_update=True)
        if wait is None:
            raise Wait.DoesNotExist(f"no waiting period {wait_id}")
        before = tallies.of_wait(wait)
        wait.deadline = deadline
        _save(wait, before, ["deadline"])
    return wait


# --- Opening, starting and ending periods ---------------------------------------------------


@dataclass(frozen=True)
class Waiting:
    """A period as one source tells it."""

    namespace_id: str
    task_id: str
    revision: int
    kind: str
    entered_at: datetime
    origin: str
    queue_id: str = ""
    handler: str = ""
    error_code: str = ""


# Plain SQL over the periods' table (lib/rows.py): a batch's chunk opens hundreds at once.
WAITS = Rows(Wait)
_LENGTHS = {"handler": HANDLER_CHARS, "queue_id": 64, "error_code": 64}


def _locked(task_id: str, revision: int) -> Wait | None:
    return WAITS.one("task_id = %s AND revision = %s", [task_id, revision], for_update=True)


def _save(wait: Wait, before: tallies.Tallies, fields: list[str]) -> None:
    WAITS.update(wait, fields)
    tallies.moved(before, tallies.of_wait(wait))
    changed(wait.namespace_id)


def wait_open(
    seen: Waiting,
    *,
    ended_at: datetime | None = None,
    end: str = "",
    started_at: datetime | None = None,
) -> Wait:
    """The period ``seen`` tells, opened unless it is known already (then only what it lacked
    is filled in: a handler, a queue, an error code). With ``ended_at``, it is recorded as
    ended then (a task that moved on before the event that tells its waiting was applied);
    with ``started_at``, a decision about it started then (the first one started is kept: the
    waiting clock's end). Part of the caller's transaction (its own when there is none)."""
    with transaction.atomic():
        wait = _locked(seen.task_id, seen.revision)
        if wait is None:
            wait = _insert(seen, ended_at=ended_at, end=end, started_at=started_at)
            if wait is not None:
                return wait
            wait = _locked(seen.task_id, seen.revision)  # a concurrent writer opened it
            assert wait is not None  # noqa: S101 -- it was there, and periods are never deleted
        before = tallies.of_wait(wait)
        fields = [
            name
            for name in ("handler", "queue_id", "error_code")
            if not getattr(wait, name) and getattr(seen, name)
        ]
        for name in fields:
            setattr(wait, name, getattr(seen, name)[: _LENGTHS[name]])
        # A decision started after the period ended (another client decided first) did not
        # end its waiting.
        if (
            started_at is not None
            and (wait.first_started_at is None or started_at < wait.first_started_at)
            and (wait.ended_at is None or started_at <= wait.ended_at)
        ):
            wait.first_started_at = max(started_at, wait.entered_at)
            fields.append("first_started_at")
        if ended_at is not None and wait.is_open:
            sample_before_change(wait.namespace_id)
            _end(wait, max(ended_at, wait.entered_at), end)
            fields += ["ended_at", "end", "open_task"]
        if fields:  # else told again: nothing changes
            _save(wait, before, fields)
        return wait


def _insert(
    seen: Waiting, *, ended_at: datetime | None, end: str, started_at: datetime | None
) -> Wait | None:
    """A new period (``None`` when a concurrent writer inserted the same one first). A period
    of the task still open at another revision ends: the task moved on from it."""
    if ended_at is None:
        sample_before_change(seen.namespace_id)
    for attempt in (1, 2):
        if ended_at is None:
            for stale in WAITS.many("open_task = %s", [seen.task_id], for_update=True):
                before = tallies.of_wait(stale)
                _end(stale, max(seen.entered_at, stale.entered_at), WaitEnd.MOVED)
                _save(stale, before, ["ended_at", "end", "open_task"])
        wait = _new(seen, ended_at=ended_at, end=end, started_at=started_at)
        try:
            with transaction.atomic():
                WAITS.insert(wait)
        except IntegrityError:
            if attempt == 2 or _locked(seen.task_id, seen.revision) is not None:
                return None
            continue  # a concurrent writer opened another period of the task: it ends
        tallies.moved(Counter(), tallies.of_wait(wait))
        changed(wait.namespace_id)
        return wait
    return None  # pragma: no cover -- the loop returns


def _new(
    seen: Waiting, *, ended_at: datetime | None, end: str, started_at: datetime | None
) -> Wait:
    wait = Wait(
        namespace_id=seen.namespace_id,
        queue_id=seen.queue_id[:64],
        task_id=seen.task_id,
        revision=seen.revision,
        kind=seen.kind,
        handler=seen.handler[:HANDLER_CHARS],
        error_code=seen.error_code[:64],
        entered_at=seen.entered_at,
        origin=seen.origin,
        open_task=seen.task_id,
        first_started_at=max(started_at, seen.entered_at) if started_at else None,
    )
    if ended_at is not None:
        _end(wait, max(ended_at, seen.entered_at), end)
    wait.deadline = _deadline_for(wait)
    return wait


def _end(wait: Wait, ended_at: datetime, end: str) -> None:
    wait.ended_at, wait.end, wait.open_task = ended_at, end, None


def wait_end(
    *, task_id: str, ended_at: datetime, end: str, below_revision: int | None = None
) -> Wait | None:
    """End the period in which ``task_id`` waits now, if any (and if its revision is below
    ``below_revision``, when given: an event at a revision ends only the periods before it).
    The period ended, or ``None``."""
    with transaction.atomic():
        wait = WAITS.one("open_task = %s", [task_id], for_update=True)
        if wait is None or (below_revision is not None and wait.revision >= below_revision):
            return None
        sample_before_change(wait.namespace_id)
        before = tallies.of_wait(wait)
        _end(wait, max(ended_at, wait.entered_at), end)
        _save(wait, before, ["ended_at", "end", "open_task"])
        return wait


def wait_decision_started(
    seen: Waiting, *, started_at: datetime, open_if_untold: bool = True
) -> Wait | None:
    """A decision about the task at ``seen.revision`` was started at ``started_at``: its first
    decision is the earliest started (the waiting clock's end). A period no source told of is
    opened from what the decider saw, unless ``open_if_untold`` is false (since when it waited
    is not known): then ``None``."""
    if not open_if_untold and _locked(seen.task_id, seen.revision) is None:
        return None
    return wait_open(seen, started_at=started_at)


# --- Samples of what waits ------------------------------------------------------------------


@dataclass(frozen=True)
class Ages:
    """The tasks waiting at one moment: how many (at most the cap: ``capped`` says there were
    more) and their ages in milliseconds (``None`` when none wait, or past the cap)."""

    count: int
    capped: bool
    p50_ms: float | None
    p95_ms: float | None
    oldest_ms: float | None


def entered_times(namespace_id: str, *, kinds: tuple[str, ...] = (), handler: str = "") -> list:
    """When each task of the namespace waiting now entered, oldest first, at most the cap and
    one more (``INSIGHT_WAITING_CAP``): one index range (``insight_waiting``)."""
    rows = Wait.objects.filter(namespace_id=namespace_id, ended_at__isnull=True)
    if kinds:
        rows = rows.filter(kind__in=kinds)
    if handler:
        rows = rows.filter(handler=handler)
    cap = settings.INSIGHT_WAITING_CAP
    return list(rows.order_by("entered_at").values_list("entered_at", flat=True)[: cap + 1])


def ages_at(entered: list[datetime], moment: datetime) -> Ages:
    """The ages at ``moment`` of tasks that entered at ``entered`` (oldest first, as
    ``entered_times`` reads them): exact nearest-rank percentiles, as the sketches'."""
    cap = settings.INSIGHT_WAITING_CAP
    if len(entered) > cap:
        oldest = max((moment - entered[0]).total_seconds() * 1000, 0.0)
        return Ages(count=cap, capped=True, p50_ms=None, p95_ms=None, oldest_ms=oldest)
    if not entered:
        return Ages(count=0, capped=False, p50_ms=None, p95_ms=None, oldest_ms=None)
    ages = sorted(max((moment - at).total_seconds() * 1000, 0.0) for at in entered)
    count = len(ages)
    return Ages(
        count=count,
        capped=False,
        p50_ms=ages[sketch.rank(0.5, count) - 1],
        p95_ms=ages[sketch.rank(0.95, count) - 1],
        oldest_ms=ages[-1],
    )


# The namespaces whose sample of this hour is known to be stored (committed): their next
# changes need not look for it.
_sampled: tuple[datetime | None, set[str]] = (None, set())


def sample_before_change(namespace_id: str, *, now: datetime | None = None) -> None:
    """Keep the tasks waiting at the start of this hour, if no change this hour has kept them:
    nothing has changed since that start, so what waits now is what waited then."""
    global _sampled
    hour = tallies.hour_of(now or timezone.now())
    if _sampled[0] != hour:
        _sampled = (hour, set())
    known = _sampled[1]
    if namespace_id in known:
        return
    if not WaitingSample.objects.filter(namespace_id=namespace_id, hour=hour).exists():
        ages = ages_at(entered_times(namespace_id), hour)
        WaitingSample.objects.bulk_create(
            [
                WaitingSample(
                    namespace_id=namespace_id,
                    hour=hour,
                    count=ages.count,
                    capped=ages.capped,
                    p50_ms=_whole(ages.p50_ms),
                    p95_ms=_whole(ages.p95_ms),
                    oldest_ms=_whole(ages.oldest_ms),
                )
            ],
            ignore_conflicts=True,
        )
    transaction.on_commit(lambda: known.add(namespace_id))


def _whole(ms: float | None) -> int | None:
    return None if ms is None else round(ms)


# --- Orbit's event stream (through the console's feed) --------------------------------------

REVIEWED_BY = "task.review"  # the operation of a review's task.completed (docs/events.md)


def _parks(event: StreamEvent) -> bool:
    return event.type == "task.needs_review"


def _ends_retryable(event: StreamEvent) -> bool:
    """A task that ended FAILED or CANCELLED other than by a review (a person decided that
    one: it does not wait for them again)."""
    return (
        event.type == "task.completed"
        and event.state in ("FAILED", "CANCELLED")
        and event.operation != REVIEWED_BY
    )


def stream_reads(event: StreamEvent) -> Reads:
    """What an event needs read again: a task that starts waiting (its handler, whether it may
    be retried, and its newest attempt's error)."""
    if _parks(event) or _ends_retryable(event):
        return Reads(task=True, last_attempt=True)
    return Reads()


def retry_possible(task: Task) -> bool:
    """RT1 as far as the task tells: standalone (no plan, no workflow), not gated, its effect
    certain, no successor yet. What an Orbit does not say does not forbid it."""
    return (
        task.state in ("FAILED", "CANCELLED")
        and task.owner_kind in (None, "NONE")
        and not task.gated
        and not task.effect_uncertain
        and not task.retry_successor_id
    )


def on_event(
    source: Source, event: StreamEvent, task: Task | None, attempt: Attempt | None
) -> None:
    """Apply one event of the stream to the periods of waiting, inside the feed's transaction
    that records it in its inbox (once per event)."""
    if event.type == "task.accepted":
        retry_of = event.extra.get("retry_of")
        if retry_of:
            wait_end(task_id=retry_of, ended_at=event.occurred_at, end=WaitEnd.RETRIED)
        return
    if event.type == "task.completed":
        how = WaitEnd.REVIEWED if event.operation == REVIEWED_BY else WaitEnd.MOVED
        wait_end(
            task_id=event.task_id,
            ended_at=event.occurred_at,
            end=how,
            below_revision=event.revision,
        )
    if _parks(event):
        kind = WaitKind.REVIEW
    elif _ends_retryable(event) and task is not None and retry_possible(task):
        kind = WaitKind.RETRY
    else:
        return
    seen = Waiting(
        namespace_id=event.namespace_id,
        task_id=event.task_id,
        revision=event.revision,
        kind=kind,
        entered_at=event.occurred_at,
        origin=WaitOrigin.STREAM,
        queue_id=event.queue_id,
        handler=task.handler if task is not None else "",
        error_code=error_code(attempt.error) if attempt is not None else "",
    )
    if task is not None and int(task.revision) != event.revision:
        # The task moved on since the event was written (the feed caught up late, or events
        # came out of order): it waited, and no longer does.
        left = task.updated_at or event.occurred_at
        wait_open(seen, ended_at=left, end=WaitEnd.MOVED)
        return
    wait_open(seen)


# --- The backfill -----------------------------------------------------------------------------

PAGE = 100


async def backfill(source: Source, orbit: OrbitClient) -> None:
    """Before the first event of a subscription: the tasks already in NEEDS_REVIEW, oldest
    first, at most ``INSIGHT_BACKFILL_MAX``, through the list endpoint with the feed's
    credential. Each listed task not known to wait is opened (as entered at its last update,
    its error code unknown); an open review period of the namespace not listed, which entered
    before the last task listed, is ended as gone (it left review while nobody was listening).
    Done once per subscription; a failure (the API away) leaves it to the next connection."""
    done = Backfill.objects.filter(
        namespace_id=source.namespace_id, subscription_id=source.subscription_id
    )
    if await done.aexists():
        return
    try:
        await _backfill(source, orbit)
    except (OrbitError, OutcomeUnknown, BadAnswer) as failed:
        # What was stored stays (each task once); the rest is looked at on the next connection.
        logger.warning(
            "insight: the backfill of %s could not list the tasks in NEEDS_REVIEW (%s): "
            "it is tried again when the stream connects again",
            source.namespace_id,
            failed,
        )


async def _backfill(source: Source, orbit: OrbitClient) -> None:
    listed: set[str] = set()
    opened = 0
    cursor: str | None = None
    last: datetime | None = None
    capped = False
    started = timezone.now()
    while True:
        page = await orbit.list_tasks(
            states=("NEEDS_REVIEW",), order="updated_asc", limit=PAGE, cursor=cursor
        )
        found = [
            Waiting(
                namespace_id=source.namespace_id,
                task_id=item.id,
                revision=int(item.revision),
                kind=WaitKind.REVIEW,
                entered_at=item.updated_at or item.created_at or started,
                origin=WaitOrigin.BACKFILL,
                queue_id=item.queue_id,
                handler=item.handler,
            )
            for item in page.items
            if item.state == "NEEDS_REVIEW"
        ]
        opened += await sync_to_async(_backfill_page)(found)
        listed.update(seen.task_id for seen in found)
        if found:
            last = found[-1].entered_at
        cursor = page.next_cursor
        if not cursor:
            break
        if len(listed) >= settings.INSIGHT_BACKFILL_MAX:
            capped = True
            break
    before = last if capped else started
    closed = await sync_to_async(_backfill_done)(source, listed, before, opened, capped)
    logger.info(
        "insight: backfilled %s: %d in NEEDS_REVIEW listed%s, %d opened, %d no longer waiting",
        source.namespace_id,
        len(listed),
        " (capped)" if capped else "",
        opened,
        closed,
    )


def _backfill_page(found: list[Waiting]) -> int:
    opened = 0
    with transaction.atomic():
        for seen in found:
            known = Wait.objects.filter(task_id=seen.task_id, revision=seen.revision).exists()
            if not known:
                wait_open(seen)
                opened += 1
    return opened


def _backfill_done(
    source: Source, listed: set[str], before: datetime | None, opened: int, capped: bool
) -> int:
    closed = 0
    now = timezone.now()
    with transaction.atomic():
        if before is not None:
            waiting = Wait.objects.filter(
                namespace_id=source.namespace_id,
                kind=WaitKind.REVIEW,
                ended_at__isnull=True,
                entered_at__lt=before,
            ).values_list("task_id", flat=True)
            for task_id in [task_id for task_id in waiting if task_id not in listed]:
                closed += wait_end(task_id=task_id, ended_at=now, end=WaitEnd.GONE) is not None
        Backfill.objects.get_or_create(
            namespace_id=source.namespace_id,
            subscription_id=source.subscription_id,
            defaults={
                "listed": len(listed),
                "capped": capped,
                "opened": opened,
                "closed": closed,
                "done_at": now,
            },
        )
    return closed
