"""The console's consumer of Orbit's event stream (I3, docs/events.md).

One console process at a time consumes (``run_feed``): every process of the deployment that
runs the feed is a candidate, and the one holding the ``Leadership`` lease consumes, renewing it
every third of ``CONSOLE_FEED_LEASE_SECONDS``; when it dies, another takes over once the lease
has run out. Two consumers for a moment (a slow renewal) are harmless: the inbox applies each
event once.

For each event, as the handbook asks:

1. read again what the event prompts (I3): the task, when a decision of the console follows it
   or a listener asks (``listen_to_events``: insight), and its newest attempt when a listener
   asks, with the stream's own credential; and, against an external Orbit, the audit record
   the event names, for the live timelines and work-queue rows;
2. in one transaction, record the event's id in the inbox and apply its effect (the follow-ups
   move, the listeners apply it; the live pushes are scheduled for the commit) — or, when the
   inbox has it already (a delivery that came again), nothing;
3. acknowledge it, after the commit.

A consumer that dies between 2 and 3 gets the delivery again after its lease (or at once, when
the same process reconnects and hands the proof back); the inbox makes it a no-op. When the
stream is missing (an Orbit without it answers 404, E1), refused or down, the consumer keeps
trying with a growing pause (``Backoff``), and meanwhile the follow-ups are looked after by
bounded looks (``decisions/followups.py``, I4) and the timelines by their watcher
(``timeline/watcher.py``).

The Orbit is not trusted (the client bounds and checks every answer and frame). An event that
cannot be applied — malformed, or what it prompts to read again refused as too large,
malformed or about another task, or unanswered in ``SET_ASIDE_AFTER`` deliveries — is set
aside (``SetAsideEvent``, counted) and acknowledged, so that it holds up none behind it. A
consumer held up on one event, or whose reads get no answer, marks its stream ``stalled``,
which is not live: the looks and the watchers take over until events are applied again.
"""

import asyncio
import collections
import contextlib
import logging
import os
import random
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, close_old_connections, transaction
from django.db.models import Q
from django.utils import timezone

from orbit_console.client import (
    Attempt,
    OperationDetail,
    OrbitClient,
    OrbitError,
    OutcomeUnknown,
    Task,
)
from orbit_console.client.errors import BadAnswer
from orbit_console.client.events import (
    EventStreamConnection,
    MalformedEvent,
    StreamEvent,
    StreamLost,
    StreamRefused,
)
from orbit_console.decisions.followups import (
    followup_looked,
    followup_observe,
    followups_due,
    followups_look_soon,
)
from orbit_console.decisions.models import FollowUp
from orbit_console.decisions.submissions import sending_credential
from orbit_console.feed.metrics import EVENTS_SET_ASIDE, MALFORMED_EVENT, UNANSWERED
from orbit_console.feed.models import InboxEvent, Leadership, SetAsideEvent, Source, SourceStatus
from orbit_console.feed.sources import (
    live_namespaces,
    renew_seconds,
    source_client,
    source_status,
    source_stream,
)
from orbit_console.lib.ids import new_id
from orbit_console.lib.live import OPERATION_MESSAGE, publish_on_commit, task_group
from orbit_console.ops.loops import Heartbeat
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import orbit_client

logger = logging.getLogger("orbit.feed")

LEADERSHIP = "feed"
FIRST_PAUSE = 1.0  # before connecting again to a stream that broke
LONGEST_PAUSE = 30.0  # between attempts to reach a stream that is down
HEALTHY_SECONDS = 30.0  # a connection up this long has proven itself: the pause starts over
INBOX_DAYS = 8  # past the stream's retention (7 days): no delivery of an older event comes
LOOKS_AT_ONCE = 8
SET_ASIDE_AFTER = 5  # deliveries of an event whose re-read got no answer, the last included
MAX_HELD = 100  # proofs held for the next connection (the server takes at most 100 back)

# What became of an event (``event_handle``).
APPLIED = "applied"
KNOWN = "known"  # the inbox had it: applied before
SET_ASIDE = "set aside"
UNREAD = "unread"  # what it prompts could not be read now: left unacknowledged, it comes again


def holder_name() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{new_id()[:8]}"


# --- Who consumes -----------------------------------------------------------------------------


def leadership_hold(holder: str) -> bool:
    """Take or renew the lease: ``True`` while this holder consumes."""
    now = timezone.now()
    until = now + timedelta(seconds=settings.CONSOLE_FEED_LEASE_SECONDS)
    with transaction.atomic():
        renewed = (
            Leadership.objects.filter(name=LEADERSHIP)
            .filter(Q(holder=holder) | Q(expires_at__lte=now))
            .update(holder=holder, expires_at=until)
        )
    if renewed:
        return True
    try:
        with transaction.atomic():
            Leadership.objects.create(name=LEADERSHIP, holder=holder, expires_at=until)
    except IntegrityError:
        return False  # held by another, who renews it
    return True


def leadership_release(holder: str) -> None:
    """Give the lease up at once (a clean stop): another process need not wait for it."""
    Leadership.objects.filter(name=LEADERSHIP, holder=holder).update(expires_at=timezone.now())


# --- Who else is told of each event ------------------------------------------------------------


@dataclass(frozen=True)
class Reads:
    """What a listener needs read again before an event is applied (I3: an event only prompts
    a re-read), with the source's credential: the task, and its newest attempt."""

    task: bool = False
    last_attempt: bool = False


@dataclass(frozen=True)
class EventListener:
    """An app above this one that acts on Orbit's events (insight: the tasks waiting for a
    person), told instead of imported. ``reads`` says what an event needs read again (cheap:
    no database); ``apply`` is called inside the transaction that records the event in the
    inbox — once per event, however often it is delivered — with what was read (``None``
    when the source's credential could not read it); ``connected``, when given, is awaited
    each time a stream of a source connects, before its first event is taken (a look at what
    the stream did not tell: insight's backfill), with the source's client; its failure is
    logged and the stream consumed all the same."""

    reads: Callable[[StreamEvent], Reads]
    apply: Callable[[Source, StreamEvent, Task | None, Attempt | None], None]
    connected: Callable[[Source, OrbitClient], Awaitable[None]] | None = None


_listeners: list[EventListener] = []


def listen_to_events(listener: EventListener) -> None:
    if listener not in _listeners:
        _listeners.append(listener)


def _reads(event: StreamEvent) -> Reads:
    wanted = [listener.reads(event) for listener in _listeners]
    return Reads(
        task=any(reads.task for reads in wanted),
        last_attempt=any(reads.last_attempt for reads in wanted),
    )


# --- Applying an event ------------------------------------------------------------------------


def followed(task_id: str) -> bool:
    return FollowUp.objects.filter(task_id=task_id, ended_at__isnull=True).exists()


def event_apply(
    source: Source,
    event: StreamEvent,
    task: Task | None,
    operations: list[OperationDetail],
    attempt: Attempt | None = None,
) -> bool:
    """The event's effect and its inbox record, in one transaction; ``False`` when the inbox
    had it (applied before: nothing happens again). ``operations`` are published to their
    tasks' groups once it commits; the listeners (``listen_to_events``) apply it in the same
    transaction, with the task and its newest ``attempt`` as read again."""
    try:
        with transaction.atomic():
            InboxEvent.objects.create(
                event_id=event.id,
                source_id=source.id,
                task_id=event.task_id,
                event_type=event.type,
                received_at=timezone.now(),
            )
            if task is not None:
                followup_observe(task)
            for listener in _listeners:
                listener.apply(source, event, task, attempt)
            for operation in operations:
                message = {"type": OPERATION_MESSAGE, "operation": operation.as_plain()}
                publish_on_commit(task_group(operation.task_id), message)
    except IntegrityError:
        return False
    return True


def event_set_aside(
    source: Source,
    *,
    reason: str,
    detail: str,
    event_id: str = "",
    task_id: str = "",
    event_type: str = "",
    attempt: int = 1,
) -> None:
    """Record an event the feed acknowledges without applying it (``reason``, a
    ``feed.metrics.SET_ASIDE_REASONS``), and have its task's follow-ups looked at instead of the
    re-read it prompted."""
    now = timezone.now()
    with transaction.atomic():
        SetAsideEvent.objects.create(
            source_id=source.id,
            event_id=event_id,
            task_id=task_id,
            event_type=event_type,
            attempt=min(attempt, 2**31 - 1),
            reason=reason,
            detail=detail[:2000],
            set_aside_at=now,
        )
        if task_id:
            followups_look_soon(task_id, now=now)
    EVENTS_SET_ASIDE.labels(reason=reason).inc()
    logger.warning(
        "feed: event %s of task %s set aside (%s): %s",
        event_id or "-",
        task_id or "-",
        reason,
        detail[:500],
    )


class Reader:
    """What one stream's consumer reads again, with the source's credential: one client for the
    consumer's life (not a new connection per event), and the audit records it published
    lately, which a delivery that comes again, or another event naming the same record, need
    not read and push again."""

    RECENT = 512

    def __init__(self, source: Source) -> None:
        self.source = source
        self.orbit = source_client(source)
        self.published: collections.OrderedDict[str, None] = collections.OrderedDict()
        self.unanswered = ""  # why the last read got no answer

    async def aclose(self) -> None:
        await self.orbit.aclose()

    def note_published(self, audit_id: str) -> None:
        self.published[audit_id] = None
        if len(self.published) > self.RECENT:
            self.published.popitem(last=False)


async def event_handle(reader: Reader, event: StreamEvent, *, attempt: int = 1) -> str:
    """Read again what the event prompts, then apply it (``event_apply``): ``APPLIED``, or
    ``KNOWN`` when the inbox had it. ``UNREAD`` when the API did not answer the read: the event
    is left unacknowledged and comes again after its lease, until its ``SET_ASIDE_AFTER``-th
    delivery; then, or at once when the answer was one the client refused (``BadAnswer``:
    another read would get the same), it is ``SET_ASIDE``.

    Against an external Orbit the timelines need the audit records the event names: its own
    (on its task) and, for a retry's new task, the retry's (on the source task)."""
    if await InboxEvent.objects.filter(event_id=event.id).aexists():
        return KNOWN
    task = None
    newest: Attempt | None = None
    operations: list[OperationDetail] = []
    reads = _reads(event)
    wants_task = reads.task or await sync_to_async(followed)(event.task_id)
    records = []
    # Against the embedded API its own announcements feed the timelines (lib/live.py).
    if settings.ORBIT_API_URL:
        records = [(event.task_id, event.audit_id)]
        if event.extra.get("retry_of") and event.extra.get("retry_audit_id"):
            records.append((event.extra["retry_of"], event.extra["retry_audit_id"]))
    try:
        if wants_task:
            task = await reader.orbit.get_task(event.task_id)
        if reads.last_attempt:
            attempts = await reader.orbit.list_attempts(event.task_id, limit=1)
            newest = attempts.items[0] if attempts.items else None
        for task_id, audit_id in records:
            if audit_id and audit_id not in reader.published:
                operations.append(await reader.orbit.get_task_operation(task_id, audit_id))
    except OrbitError as refused:
        # Out of the stream credential's reach (403/404): apply what could be read.
        logger.info("feed: cannot read %s again: %s", event.task_id, refused.code)
    except BadAnswer as bad:
        await _set_aside(reader, event, attempt, bad.kind, str(bad))
        return SET_ASIDE
    except OutcomeUnknown as unknown:
        logger.warning("feed: reading %s again: %s", event.task_id, unknown)
        if attempt < SET_ASIDE_AFTER:
            reader.unanswered = str(unknown)
            return UNREAD
        await _set_aside(reader, event, attempt, UNANSWERED, str(unknown))
        return SET_ASIDE
    applied = await sync_to_async(event_apply)(reader.source, event, task, operations, newest)
    if applied:
        for operation in operations:
            reader.note_published(operation.id)
    return APPLIED if applied else KNOWN


async def _connected(source: Source, reader: Reader) -> None:
    """Tell the listeners that want to know that a stream of ``source`` is connected; the
    stream's heartbeats go on meanwhile, and its events wait until they are done."""
    for listener in _listeners:
        if listener.connected is None:
            continue
        try:
            await listener.connected(source, reader.orbit)
        except Exception:
            logger.exception("feed: a listener failed when %s connected", source.subscription_id)


async def _set_aside(
    reader: Reader, event: StreamEvent, attempt: int, reason: str, why: str
) -> None:
    await sync_to_async(event_set_aside)(
        reader.source,
        reason=reason,
        detail=why,
        event_id=event.id,
        task_id=event.task_id,
        event_type=event.type,
        attempt=attempt,
    )


class Backoff:
    """The pause before connecting to a stream again: ``FIRST_PAUSE``, doubling after every
    connection that failed or did not last, up to ``LONGEST_PAUSE``, each with jitter (half to
    all of it, so that consoles do not come back in step). It starts over only once a connection
    has proven itself: it stayed up ``HEALTHY_SECONDS``, or events were applied over it; a
    server that accepts and drops every connection at once is tried ever less often."""

    def __init__(self, jitter: Callable[[], float] = random.random) -> None:
        self.jitter = jitter
        self.next = FIRST_PAUSE
        self.proven = False

    def pause(self, *, connected_for: float | None) -> float:
        """The pause after a connection that lasted ``connected_for`` seconds (``None``: it
        never opened)."""
        if self.proven or (connected_for is not None and connected_for >= HEALTHY_SECONDS):
            self.next = FIRST_PAUSE
        self.proven = False
        pause = self.next * (0.5 + self.jitter() / 2)
        self.next = min(self.next * 2, LONGEST_PAUSE)
        return pause


# --- The consumer -----------------------------------------------------------------------------


class Feed:
    """What one candidate process runs: the lease, a consumer per source while it holds it,
    and the follow-ups' looks while no live stream covers their namespace."""

    def __init__(
        self, stop: asyncio.Event, *, holder: str | None = None, heartbeat: Heartbeat | None = None
    ) -> None:
        self.stop = stop
        self.holder = holder or holder_name()
        # ``feed run --health-port``: a round beats when the lease could be read (consuming or
        # standing by alike); a process that cannot read it for long is not ready.
        self.heartbeat = heartbeat
        self.consumers: dict[str, asyncio.Task[None]] = {}
        # What each consumer was started with: a source added again (another subscription or
        # token) is consumed afresh, a source removed is no longer consumed.
        self.configured: dict[str, tuple[str, str]] = {}
        # When each source last applied an event, written with the lease's renewals.
        self.applied_at: dict[str, datetime] = {}
        # Proofs of deliveries this process held and did not acknowledge when a connection
        # broke: handed back on the next connection (I3). Ordered: the latest are handed back.
        self.held: dict[str, dict[str, None]] = {}
        # Since when each consumer has been handling its current event (monotonic), and which
        # streams are marked stalled (not live) until an event is applied again.
        self.busy: dict[str, float] = {}
        self.stalled: set[str] = set()
        self.leading = False
        self.looking: asyncio.Task[None] | None = None

    async def run(self) -> None:
        try:
            while not self.stop.is_set():
                await self._round()
                await _pause(self.stop, renew_seconds())
        finally:
            await self._stand_down()
            await sync_to_async(leadership_release)(self.holder)

    async def _round(self) -> None:
        try:
            leading = await sync_to_async(leadership_hold)(self.holder)
        except Exception as failed:
            logger.exception("feed: the lease could not be read")
            if self.heartbeat is not None:
                self.heartbeat.failed(failed)
            leading = False
        else:
            if self.heartbeat is not None:
                self.heartbeat.beat()
        if leading != self.leading:
            logger.info("feed: %s %s", self.holder, "consumes" if leading else "stands by")
        self.leading = leading
        if not leading:
            await self._stand_down()
            return
        sources = {source.id: source async for source in Source.objects.all()}
        for source_id in list(self.consumers):
            source = sources.get(source_id)
            wanted = (source.subscription_id, source.token_ciphertext) if source else None
            if wanted != self.configured.get(source_id):
                await self._stop(source_id)
        for source in sources.values():
            running = self.consumers.get(source.id)
            if running is None or running.done():
                self.configured[source.id] = (source.subscription_id, source.token_ciphertext)
                self.consumers[source.id] = asyncio.create_task(self._consume(source))
        # A consumer held up on one event for as long as the lease (three renewals: a stream
        # renewed no longer would fall out of live by itself) has stalled: it says so at once.
        held_up = time.monotonic() - settings.CONSOLE_FEED_LEASE_SECONDS
        for source_id, since in list(self.busy.items()):
            if since <= held_up and source_id in sources:
                await self._stall(sources[source_id], "held up on one event since its delivery")
        await sync_to_async(self._renew)(list(sources))
        # The looks run beside the lease's renewals, never holding them up: a slow API must not
        # let the lease run out under a living consumer.
        if self.looking is None or self.looking.done():
            self.looking = asyncio.create_task(self._look_after_followups())
        await sync_to_async(close_old_connections)()

    def _renew(self, source_ids: list[str]) -> None:
        """Live streams stay live while the consuming process lives (``live_namespaces``)."""
        Source.objects.filter(id__in=source_ids, status=SourceStatus.LIVE).update(
            status_at=timezone.now()
        )
        for source_id, applied_at in self.applied_at.items():
            Source.objects.filter(id=source_id).update(last_event_at=applied_at)
        self.applied_at.clear()
        kept = timezone.now() - timedelta(days=INBOX_DAYS)
        InboxEvent.objects.filter(received_at__lt=kept).delete()
        SetAsideEvent.objects.filter(set_aside_at__lt=kept).delete()

    async def _stand_down(self) -> None:
        for source_id in list(self.consumers):
            await self._stop(source_id)
        if self.looking is not None:
            self.looking.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self.looking
            self.looking = None

    async def _stop(self, source_id: str) -> None:
        consumer = self.consumers.pop(source_id, None)
        self.configured.pop(source_id, None)
        if consumer is not None:
            consumer.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await consumer

    async def _consume(self, source: Source) -> None:
        reader = Reader(source)
        try:
            await self._consume_with(source, reader)
        finally:
            await reader.aclose()

    async def _consume_with(self, source: Source, reader: Reader) -> None:
        backoff = Backoff()
        held = self.held.setdefault(source.id, {})
        while not self.stop.is_set():
            connected_at: float | None = None
            try:
                async with await source_stream(source) as stream:
                    connected_at = time.monotonic()
                    self.stalled.discard(source.id)
                    await sync_to_async(source_status)(source.id, SourceStatus.LIVE)
                    await stream.resume(list(held))
                    await _connected(source, reader)
                    while True:
                        if await self._take(source, reader, stream, held):
                            backoff.proven = True
            except StreamRefused as refused:
                status = SourceStatus.MISSING if refused.status == 404 else SourceStatus.REFUSED
                await self._down(source, status, str(refused))
            except (StreamLost, OSError) as lost:
                await self._down(source, SourceStatus.DOWN, str(lost))
            except asyncio.CancelledError:
                raise
            except Exception as failed:
                logger.exception("feed: consuming %s failed", source.subscription_id)
                await self._down(source, SourceStatus.DOWN, type(failed).__name__)
            finally:
                self.busy.pop(source.id, None)
            connected_for = None if connected_at is None else time.monotonic() - connected_at
            await _pause(self.stop, backoff.pause(connected_for=connected_for))

    async def _take(
        self,
        source: Source,
        reader: Reader,
        stream: EventStreamConnection,
        held: dict[str, None],
    ) -> bool:
        """Handle the stream's next delivery: ``True`` when an event was applied (or had been)."""
        try:
            delivery = await stream.receive()
        except MalformedEvent as bad:
            await sync_to_async(event_set_aside)(
                source,
                reason=MALFORMED_EVENT,
                detail=bad.reason,
                event_id=bad.event_id,
                task_id=bad.task_id,
                attempt=bad.attempt,
            )
            await stream.ack(bad.proof)
            return False
        held[delivery.proof] = None
        while len(held) > MAX_HELD:
            del held[next(iter(held))]
        self.busy[source.id] = time.monotonic()
        try:
            outcome = await event_handle(reader, delivery.event, attempt=delivery.attempt)
        finally:
            self.busy.pop(source.id, None)
        if outcome == UNREAD:
            await self._stall(source, f"event {delivery.event.id} not read: {reader.unanswered}")
            return False  # unacknowledged: it comes again
        if outcome == APPLIED:
            self.applied_at[source.id] = timezone.now()
        await stream.ack(delivery.proof)  # after the commit
        held.pop(delivery.proof, None)
        if outcome == SET_ASIDE:
            return False
        if source.id in self.stalled:
            self.stalled.discard(source.id)
            await sync_to_async(source_status)(source.id, SourceStatus.LIVE)
            logger.info("feed: stream %s is live again", source.subscription_id)
        return True

    async def _stall(self, source: Source, note: str) -> None:
        """The stream stops counting as live (``live_namespaces``) until an event is applied."""
        if source.id in self.stalled:
            return
        self.stalled.add(source.id)
        await self._down(source, SourceStatus.STALLED, note)

    async def _down(self, source: Source, status: str, note: str) -> None:
        logger.warning("feed: stream %s is %s: %s", source.subscription_id, status, note)
        try:
            await sync_to_async(source_status)(source.id, status, note)
        except Exception:
            logger.exception("feed: the stream's status could not be written")

    async def _look_after_followups(self) -> None:
        """I4: the follow-ups no live stream tells about, looked at with their own backoff."""
        now = timezone.now()
        due = await sync_to_async(_due)(now)
        gate = asyncio.Semaphore(LOOKS_AT_ONCE)

        async def look(followup: FollowUp, credential: OrbitCredential | None) -> None:
            async with gate:
                try:
                    if credential is not None:
                        async with orbit_client(credential) as orbit:
                            task = await orbit.get_task(followup.task_id)
                        await sync_to_async(followup_observe)(task)
                except (OrbitError, OutcomeUnknown) as failed:
                    logger.info("feed: looking at %s: %s", followup.task_id, failed)
                finally:
                    await sync_to_async(followup_looked)(followup, now=timezone.now())

        await asyncio.gather(*(look(followup, credential) for followup, credential in due))


def _due(now: Any) -> list[tuple[FollowUp, OrbitCredential | None]]:
    """The due follow-ups, each with the credential its decision was sent with."""
    due = followups_due(now=now, skip_namespaces=live_namespaces(now=now))
    senders = {followup.submission.sent_as_id for followup in due}
    held: dict[int, list[OrbitCredential]] = {}
    for credential in OrbitCredential.objects.filter(user_id__in=senders):
        held.setdefault(credential.user_id, []).append(credential)
    return [
        (
            followup,
            sending_credential(followup.submission, held.get(followup.submission.sent_as_id, [])),
        )
        for followup in due
    ]


async def _pause(stop: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), timeout=seconds)


async def run_feed(stop: asyncio.Event, *, heartbeat: Heartbeat | None = None) -> None:
    """A candidate to consume Orbit's events, until ``stop`` (a service of ``ops/background``,
    and ``manage.py feed run``, whose ``heartbeat`` beats at each round that read the lease)."""
    await Feed(stop, heartbeat=heartbeat).run()
