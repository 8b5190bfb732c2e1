"""Live notifications over the channel layer: the groups and message types the ledger, the
console and the timeline agree on, and publishing that never fails a write.

One group per task, ``orbit.task.<task_id>``, carries two message types:
``ledger.operation`` (a new platform audit record, its detail in ``operation``) and
``console.event`` (a new console event, in ``event``). Messages hold plain JSON types only, so
that every channel layer can carry them.
"""

import asyncio
import collections
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from prometheus_client import Counter, Histogram

logger = logging.getLogger("orbit.live")

# On the default registry, which /metrics serves (ops/metrics.py).
PUBLISH_FAILURES = Counter(
    "orbit_channel_layer_publish_failures_total",
    "Live notifications the channel layer failed to take",
)
PUBLISH_LATENCY = Histogram(
    "orbit_live_publish_duration_seconds",
    "From a commit's live notification being handed over to the channel layer taking it",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5),
)

OPERATION_MESSAGE = "ledger.operation"
CONSOLE_EVENT_MESSAGE = "console.event"


# How the console's sockets close when they will not serve (private codes, 4000-4999: daphne,
# one of the two servers a worker can run, sends no other kind, so 1013 "try again later" is
# not available): no session; not allowed;
# and, for a socket that cannot join its group because the channel layer is down or hung
# (issue 14), "live updates paused": the page says so and tries again with backoff.
CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_UNAVAILABLE = 4503
JOIN_TIMEOUT_SECONDS = 2.0


def task_group(task_id: str) -> str:
    """The group of one task (ASCII letters, digits and dots; well under 100 characters)."""
    return f"orbit.task.{task_id}"


# What a person's decisions led to (``decisions/followups.py``): the group of one person, and
# its message when a followed task moved (or one of their decisions was stored or answered).
FOLLOWUP_MESSAGE = "decision.followed"
# A proposal or a batch of theirs was made or moved (issue 30: "My decisions" lists the ones
# waiting for approval, and adds and drops their rows live).
PROPOSAL_MESSAGE = "decision.proposal"
BATCH_MESSAGE = "decision.batch"


def person_group(user_id: int) -> str:
    return f"orbit.person.{user_id}"


def publish(group: str, message: dict[str, Any]) -> bool:
    """Send to a group within ``ORBIT_PUBLISH_TIMEOUT``. A failure or a timeout is logged and
    counted, never raised: a write must not fail, nor wait on a hung channel layer, because a
    notification could not go out (viewers catch up when they reconnect).

    In a server process the message goes to the process's outbox (``Outbox``) and the thread
    that committed goes on at once; ``True`` then means "handed over". Elsewhere (a command, a
    script, a test) it is sent before this returns, and ``True`` means "sent"."""
    outbox = _outbox
    if outbox is not None and outbox.put(group, message):
        return True
    layer = get_channel_layer()
    if layer is None:
        return False
    send = async_to_sync(_send_within)
    handed = time.perf_counter()
    try:
        if _loop_running_here():
            # Sync code called from a thread that runs an event loop (not a server path, but a
            # script or test driving one): send from a helper thread instead of failing.
            with ThreadPoolExecutor(max_workers=1) as pool:
                pool.submit(send, layer, group, message).result()
        else:
            send(layer, group, message)
    except Exception:
        _failed(group)
        return False
    PUBLISH_LATENCY.observe(time.perf_counter() - handed)
    return True


def _failed(group: str) -> None:
    PUBLISH_FAILURES.inc()
    logger.exception("channel layer publish failed", extra={"group": group})


class Outbox:
    """The live notifications of one server process, sent from its event loop in the order they
    were committed, one at a time, each within ``ORBIT_PUBLISH_TIMEOUT``.

    Publishing from the thread that committed used to wait for the channel layer (a hop to the
    loop and a Redis round trip) while that thread, the process's one sync thread, held every
    other request's database work (docs/performance.md). At most ``capacity`` wait; beyond that
    (a channel layer that stopped answering) new ones are dropped and counted as failures.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, capacity: int = 10_000) -> None:
        self.loop = loop
        self.capacity = capacity
        # Each message with the moment it was handed over: its latency includes the wait here.
        self._waiting: collections.deque[tuple[str, dict[str, Any], float]] = collections.deque()
        self._draining = False

    def put(self, group: str, message: dict[str, Any]) -> bool:
        """Hand a message to the loop; ``False`` when the loop is gone."""
        try:
            self.loop.call_soon_threadsafe(self._add, group, message, time.perf_counter())
        except RuntimeError:  # the loop was closed
            return False
        return True

    def _add(self, group: str, message: dict[str, Any], handed: float) -> None:
        if len(self._waiting) >= self.capacity:
            PUBLISH_FAILURES.inc()
            logger.warning("live outbox full: a notification was dropped", extra={"group": group})
            return
        self._waiting.append((group, message, handed))
        if not self._draining:
            self._draining = True
            self.loop.create_task(self._drain())

    async def _drain(self) -> None:
        try:
            while self._waiting:
                group, message, handed = self._waiting.popleft()
                layer = get_channel_layer()
                if layer is None:
                    continue
                try:
                    await _send_within(layer, group, message)
                except Exception:
                    _failed(group)
                else:
                    PUBLISH_LATENCY.observe(time.perf_counter() - handed)
        finally:
            self._draining = False


_outbox: Outbox | None = None


def serve_from_running_loop() -> None:
    """Called on a server's event loop (by the ASGI handler): publish from this loop's outbox
    from now on. Cheap when it already does."""
    global _outbox
    loop = asyncio.get_running_loop()
    if _outbox is None or _outbox.loop is not loop:
        _outbox = Outbox(loop)


async def _send_within(layer: Any, group: str, message: dict[str, Any]) -> None:
    await asyncio.wait_for(layer.group_send(group, message), timeout=settings.ORBIT_PUBLISH_TIMEOUT)


async def join(layer: Any, group: str, channel_name: str) -> bool:
    """Add a socket to ``group``; ``False`` (logged) when the channel layer does not answer
    within ``JOIN_TIMEOUT_SECONDS`` or fails: the socket then closes with ``CLOSE_UNAVAILABLE``
    instead of failing its handshake with a 500."""
    try:
        await asyncio.wait_for(layer.group_add(group, channel_name), timeout=JOIN_TIMEOUT_SECONDS)
    except Exception:
        logger.warning("channel layer unavailable: a socket cannot join %s", group, exc_info=True)
        return False
    return True


async def signed_in_or_close(consumer: Any) -> Any | None:
    """The socket's signed-in user; ``None`` once the socket is closed (4401) for want of one."""
    user = consumer.scope.get("user")
    if user is None or not user.is_authenticated:
        await consumer.close(code=CLOSE_UNAUTHENTICATED)
        return None
    return user


async def join_or_close(consumer: Any, group: str) -> bool:
    """Join a consumer's socket to ``group``; when the channel layer fails, close the socket
    with ``CLOSE_UNAVAILABLE`` (after accepting it: a close code needs an open socket; the page
    then retries) and say ``False``."""
    if await join(consumer.channel_layer, group, consumer.channel_name):
        return True
    await consumer.accept()
    await consumer.close(code=CLOSE_UNAVAILABLE)
    return False


def _loop_running_here() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def publish_on_commit(group: str, message: dict[str, Any]) -> None:
    """Publish once the current transaction commits; nothing if it rolls back."""
    transaction.on_commit(lambda: publish(group, message))
