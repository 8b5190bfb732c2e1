"""The delivery worker: ``manage.py notify deliver`` (started by ``manage.py demo`` too).

Three lanes in one process, none waiting for another (docs/notifications.md):

- **webhooks**: every due message is claimed and sent as a task of its own, at most
  ``CONSOLE_WEBHOOK_CONCURRENCY`` at once and ``CONSOLE_WEBHOOK_ENDPOINT_CONCURRENCY`` to one
  endpoint, each within its deadline (``delivery.py``). A slot that frees is filled at once, so
  an endpoint that drips or never answers holds its own few slots, for one deadline each, and
  never another endpoint's;
- **email**: on a thread of its own (Django's mailers block), so no webhook delays it;
- **scans**: what time causes (``scans.py``), once per ``interval``.

The database work of the webhooks and the scans runs on asgiref's one sync thread, the mail
lane's on its own thread, the requests on the event loop. A wake-up (``wakeup.py``) starts a
pass at once: from this process directly, from another through the shared channel layer
(Redis); a worker with neither polls every ``interval``. Every attempt is recorded before and
after it is made, so a restart loses nothing.
"""

import asyncio
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from datetime import datetime

import httpx
from asgiref.sync import sync_to_async
from channels.layers import DEFAULT_CHANNEL_LAYER, channel_layers
from django.conf import settings
from django.db import close_old_connections, connections
from django.utils import timezone

from orbit_console.notifications import delivery, mail, scans, wakeup
from orbit_console.ops.loops import Heartbeat
from orbit_console.ops.workers import shares_channel_layer

logger = logging.getLogger("orbit.notifications.worker")

# After failed passes the worker waits longer each time, never more than this (the health
# check's patience is built on it: notify.py).
MAX_BACKOFF = 30.0
# Joining the wake-up group again this often: the channel layer forgets members after a day.
REJOIN_SECONDS = 3600.0
JOIN_TIMEOUT_SECONDS = 5.0


class Worker:
    """One delivery worker's lanes. ``clock`` says what time it is when due messages are looked
    for (tests move it ahead to skip a backoff)."""

    def __init__(
        self,
        *,
        interval: float,
        heartbeat: Heartbeat | None = None,
        clock: Callable[[], datetime] = timezone.now,
    ) -> None:
        self.interval = interval
        self.heartbeat = heartbeat
        self.clock = clock
        # Attempts under way: message id -> (endpoint id, its task).
        self.in_flight: dict[str, tuple[str, asyncio.Task[None]]] = {}
        # Messages not to claim again in this run (``once``: each is tried once).
        self.tried: set[str] | None = None
        # What the next pass looks at: every endpoint (after a wake-up, a poll, or when every
        # slot was taken), else only the endpoints whose slot an ended attempt freed.
        self.look_everywhere = True
        self.freed: set[str] = set()
        # Endpoints at their limit when last looked at: more of theirs may be due.
        self.waiting: set[str] = set()
        self.changed = asyncio.Event()  # something for the next pass
        self.mail_due = asyncio.Event()
        self.mail_thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="notifier-mail")

    # --- Webhooks ---------------------------------------------------------------------------

    async def dispatch(self, client: httpx.AsyncClient, endpoint_id: str | None = None) -> int:
        """Claim what is due (of one endpoint with ``endpoint_id``) into the free slots and
        start each attempt; how many started."""
        slots = settings.CONSOLE_WEBHOOK_CONCURRENCY - len(self.in_flight)
        if slots <= 0:
            return 0
        busy = Counter(endpoint for endpoint, _ in self.in_flight.values())
        skip = set(self.in_flight) | (self.tried or set())
        claims = await sync_to_async(delivery.claim_due)(
            self.clock(), slots=slots, in_flight=busy, skip_messages=skip, endpoint_id=endpoint_id
        )
        for out in claims.outs:
            if self.tried is not None:
                self.tried.add(out.message_id)
            task = asyncio.create_task(self._attempt(client, out))
            self.in_flight[out.message_id] = (out.endpoint_id, task)
        if endpoint_id is None:
            self.waiting = claims.limited
        elif endpoint_id in claims.limited:
            self.waiting.add(endpoint_id)
        else:
            self.waiting.discard(endpoint_id)
        # Attempts that ended while this look was under way freed slots it did not count.
        busy = Counter(endpoint for endpoint, _ in self.in_flight.values())
        limit = settings.CONSOLE_WEBHOOK_ENDPOINT_CONCURRENCY
        if any(busy[endpoint] < limit for endpoint in self.waiting):
            self.freed |= {endpoint for endpoint in self.waiting if busy[endpoint] < limit}
            self.changed.set()
        if len(claims.outs) == slots and len(self.in_flight) < settings.CONSOLE_WEBHOOK_CONCURRENCY:
            self.look_everywhere = True  # it took all it could, and there is room again
            self.changed.set()
        return len(claims.outs)

    async def _attempt(self, client: httpx.AsyncClient, out: delivery.Outgoing) -> None:
        try:
            answer = await delivery.attempt(client, out)
            await sync_to_async(delivery.record)(out, answer)
        except Exception:
            # The database away: the claim's lease runs out and the message is tried again.
            logger.exception("webhook message %s: try %s not recorded", out.message_id, out.number)
        finally:
            self._freed(out)

    def _freed(self, out: delivery.Outgoing) -> None:
        """An attempt ended. Its slot is worth filling only where something may wait for it:
        anywhere when every slot was taken, else its endpoint when that was at its limit at
        the last look (which took all of the endpoint's due messages it could). A message that
        becomes due later comes with a wake-up or the next poll."""
        every_slot = len(self.in_flight) >= settings.CONSOLE_WEBHOOK_CONCURRENCY
        self.in_flight.pop(out.message_id, None)
        if every_slot:
            self.look_everywhere = True
        elif out.endpoint_id in self.waiting:
            self.freed.add(out.endpoint_id)
        else:
            return
        self.changed.set()

    async def settle(self) -> None:
        """Wait for every attempt under way (each ends by its deadline) to be recorded."""
        while self.in_flight:
            await asyncio.wait([task for _, task in self.in_flight.values()])

    # --- Email ------------------------------------------------------------------------------

    def _mail_pass(self) -> int:
        close_old_connections()
        return mail.deliver_due()

    async def mail_pass(self) -> int:
        return await asyncio.get_running_loop().run_in_executor(self.mail_thread, self._mail_pass)

    async def _mail_lane(self, stop: threading.Event) -> None:
        failures = 0
        while not stop.is_set():
            self.mail_due.clear()
            try:
                sent = await self.mail_pass()
            except Exception as error:
                failures += 1
                logger.exception("an email pass failed")
                if self.heartbeat is not None:
                    self.heartbeat.failed(error)
                pause = min(self.interval * 2**failures, MAX_BACKOFF)
            else:
                failures = 0
                pause = 0.0 if sent >= mail.PASS_LIMIT else self.interval
            await _wait(self.mail_due, pause, stop)

    # --- Wake-ups ---------------------------------------------------------------------------

    def woken(self) -> None:
        """On the loop: something new to send."""
        self.look_everywhere = True
        self.changed.set()
        self.mail_due.set()

    async def _listen_across_processes(self) -> None:
        """Hear the wake-ups of other processes through the shared channel layer. A channel
        layer of its own (channels_redis receives on one event loop per layer); while it fails,
        polling carries on alone."""
        if not shares_channel_layer():
            return
        layer = channel_layers.make_backend(DEFAULT_CHANNEL_LAYER)
        channel = await layer.new_channel()
        failures = 0
        try:
            while True:
                try:
                    await asyncio.wait_for(
                        layer.group_add(wakeup.WAKE_GROUP, channel), JOIN_TIMEOUT_SECONDS
                    )
                    failures = 0
                    with suppress(TimeoutError):
                        async with asyncio.timeout(REJOIN_SECONDS):
                            while True:
                                await layer.receive(channel)
                                self.woken()
                except Exception:
                    failures += 1
                    pause = min(2.0**failures, 60.0)
                    logger.warning("wake-ups from other processes paused %.0fs", pause)
                    await asyncio.sleep(pause)
        finally:
            with suppress(Exception):
                await asyncio.wait_for(
                    layer.group_discard(wakeup.WAKE_GROUP, channel), JOIN_TIMEOUT_SECONDS
                )
            with suppress(Exception):
                await layer.close_pools()

    # --- Running ----------------------------------------------------------------------------

    async def serve(self, stop: threading.Event) -> None:
        """Pass after pass until ``stop``; each pass that succeeds beats the heartbeat (its
        ``--health-port`` and the NotifierNotTicking alert read it), each that fails counts.
        On ``stop`` no new attempt starts and those under way are recorded."""
        loop = asyncio.get_running_loop()
        _resolve_apart(loop)

        def wake() -> None:
            loop.call_soon_threadsafe(self.woken)

        wakeup.listen(wake)
        lanes = [
            asyncio.create_task(self._mail_lane(stop)),
            asyncio.create_task(self._listen_across_processes()),
        ]
        try:
            async with delivery.new_client() as client:
                await self._webhook_lane(client, stop)
                await self.settle()
        finally:
            wakeup.forget(wake)
            lanes[1].cancel()
            self.woken()  # the mail lane sees ``stop``
            await asyncio.gather(*lanes, return_exceptions=True)
            await self._close()

    async def _webhook_lane(self, client: httpx.AsyncClient, stop: threading.Event) -> None:
        failures = 0
        next_scan = 0.0
        while not stop.is_set():
            self.changed.clear()
            try:
                if time.monotonic() >= next_scan:
                    next_scan = time.monotonic() + self.interval
                    # As at the end of a request: a connection that failed or is due to
                    # retire is closed, and the next query opens a fresh one.
                    await sync_to_async(close_old_connections)()
                    await sync_to_async(scans.scan)(timezone.now())
                    self.look_everywhere = True
                if self.look_everywhere:
                    self.look_everywhere = False
                    self.freed.clear()
                    await self.dispatch(client)
                while self.freed:
                    await self.dispatch(client, self.freed.pop())
            except Exception as error:
                failures += 1
                logger.exception("a notification pass failed")
                if self.heartbeat is not None:
                    self.heartbeat.failed(error)
                await sync_to_async(close_old_connections)()
                pause = min(self.interval * 2 ** min(failures, 5), MAX_BACKOFF)
                await _wait(None, pause, stop)  # a wake-up does not shorten the backoff
                continue
            failures = 0
            if self.heartbeat is not None:
                self.heartbeat.beat()
            await _wait(self.changed, next_scan - time.monotonic(), stop)

    async def once(self) -> int:
        """One pass: the scans, the email due, and every webhook message due tried once.
        How many webhook messages were tried."""
        self.tried = set()
        _resolve_apart(asyncio.get_running_loop())
        try:
            await sync_to_async(scans.scan)(timezone.now())
            await self.mail_pass()
            async with delivery.new_client() as client:
                while await self.dispatch(client) or self.in_flight:
                    await asyncio.wait(
                        [task for _, task in self.in_flight.values()],
                        return_when=asyncio.FIRST_COMPLETED,
                    )
            return len(self.tried)
        finally:
            await self.settle()
            await self._close()

    async def _close(self) -> None:
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(self.mail_thread, connections.close_all)
        self.mail_thread.shutdown(wait=False)


def _resolve_apart(loop: asyncio.AbstractEventLoop) -> None:
    """Host names are resolved on the loop's default executor (ours and httpx's lookups), and a
    lookup that hangs holds its thread past the attempt's deadline: a thread for every slot,
    and as many again, so that one endpoint's hanging DNS never delays another's lookup."""
    slots = settings.CONSOLE_WEBHOOK_CONCURRENCY
    loop.set_default_executor(
        ThreadPoolExecutor(max_workers=2 * slots, thread_name_prefix="notifier-resolve")
    )


async def _wait(event: asyncio.Event | None, seconds: float, stop: threading.Event) -> None:
    """Until ``event`` is set (a wake-up), ``seconds`` have passed or ``stop`` is set (a
    wake-up comes with it: ``notify deliver``'s signal handler)."""
    end = time.monotonic() + seconds
    while not stop.is_set() and (left := end - time.monotonic()) > 0:
        if event is None:
            await asyncio.sleep(min(left, 0.5))
            continue
        with suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), left)
        if event.is_set():
            return


def run(
    *,
    interval: float,
    stop: threading.Event,
    once: bool = False,
    heartbeat: Heartbeat | None = None,
) -> None:
    """``notify deliver``: the worker until ``stop`` (``once``: one pass)."""
    worker = Worker(interval=interval, heartbeat=heartbeat)
    if once:
        asyncio.run(worker.once())
    else:
        asyncio.run(worker.serve(stop))


def deliver_once(*, clock: Callable[[], datetime] = timezone.now) -> int:
    """One pass, as ``notify deliver --once`` makes it; how many webhook messages were tried."""
    return asyncio.run(Worker(interval=0, clock=clock).once())
