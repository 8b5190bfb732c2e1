"""Watching tasks on an external Orbit when its event stream does not tell the console.

Against an external Orbit the task groups are fed by the console's consumer of Orbit's event
stream (``feed/consumer.py``). While that stream is not live for the task's namespace — the
Orbit has none (E1), it is down, or no subscription is consumed — one poller per task watched
in this process lists its newest operations with a viewer's credential and publishes the new
ones to the task's group in the same message shape. Polling is bounded (I4): it starts at
``TIMELINE_POLL_SECONDS``, doubles while nothing changes up to ``TIMELINE_POLL_MAX_SECONDS``,
and stops at ``TIMELINE_WATCH_DEADLINE_SECONDS`` (viewers then catch up when they reconnect) or
when the last viewer leaves. While the stream is live the poller only keeps what it has seen up
to date, once per longest pause, so that it takes over without repeating old entries.
"""

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings

from orbit_console.client import OrbitError, OutcomeUnknown
from orbit_console.feed.sources import live_namespaces
from orbit_console.lib.live import OPERATION_MESSAGE, task_group
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import orbit_client

logger = logging.getLogger("orbit.timeline.watcher")


@dataclass
class _Watch:
    credential: OrbitCredential
    viewers: int = 1
    task: asyncio.Task[None] | None = None
    seen: set[str] = field(default_factory=set)
    learned: bool = False  # the operations already there are known (the first look succeeded)
    ready: asyncio.Event = field(default_factory=asyncio.Event)  # the first look is over


_watches: dict[str, _Watch] = {}


async def watch(task_id: str, credential: OrbitCredential, layer: Any) -> None:
    """Start (or join) the task's watch. The first look, which only learns the operations
    already there, is taken before this returns, that is before the socket is accepted: every
    operation committed after the page's catch-up (which follows the accept) is then pushed."""
    current = _watches.get(task_id)
    if current is not None and (current.task is None or not current.task.done()):
        current.viewers += 1
        await current.ready.wait()
        return
    state = _Watch(credential=credential)
    _watches[task_id] = state
    try:
        await _new_operations(task_id, state, publish=False)
        state.learned = True
    except (OrbitError, OutcomeUnknown) as exc:
        logger.warning("watching %s: %s", task_id, exc)
    finally:
        state.ready.set()
    if _watches.get(task_id) is state:  # not left meanwhile by every viewer
        state.task = asyncio.create_task(_poll(task_id, state, layer))


def unwatch(task_id: str) -> None:
    state = _watches.get(task_id)
    if state is None:
        return
    state.viewers -= 1
    if state.viewers <= 0:
        if state.task is not None:
            state.task.cancel()
        _watches.pop(task_id, None)


def watched() -> list[str]:
    return list(_watches)


async def _poll(task_id: str, state: _Watch, layer: Any) -> None:
    deadline = time.monotonic() + settings.TIMELINE_WATCH_DEADLINE_SECONDS
    delay = settings.TIMELINE_POLL_SECONDS
    while time.monotonic() < deadline:
        await asyncio.sleep(delay)
        live = await _stream_is_live(state.credential.namespace_id)
        try:
            # While the stream publishes, only learn what it announced, seldom.
            messages = await _new_operations(task_id, state, publish=state.learned and not live)
            state.learned = True
        except (OrbitError, OutcomeUnknown) as exc:
            logger.warning("watching %s: %s", task_id, exc)
            messages = []
        for message in messages:
            await layer.group_send(task_group(task_id), message)
        if live:
            delay = settings.TIMELINE_POLL_MAX_SECONDS
        elif messages:
            delay = settings.TIMELINE_POLL_SECONDS
        else:
            delay = min(delay * 2, settings.TIMELINE_POLL_MAX_SECONDS)
    if _watches.get(task_id) is state:
        _watches.pop(task_id, None)


async def _stream_is_live(namespace_id: str) -> bool:
    return namespace_id in await sync_to_async(live_namespaces)()


async def _new_operations(task_id: str, state: _Watch, *, publish: bool) -> list[dict[str, Any]]:
    """Group messages for the operations not seen before (none on the first look, which only
    learns what is already there), oldest first."""
    async with orbit_client(state.credential) as orbit:
        page = await orbit.list_task_operations(task_id, limit=20)
        new_items = [item for item in page.items if item.id not in state.seen]
        state.seen.update(item.id for item in new_items)
        if not publish or not new_items:
            return []
        details = await asyncio.gather(
            *(orbit.get_task_operation(task_id, item.id) for item in new_items)
        )
    return [
        {"type": OPERATION_MESSAGE, "operation": detail.as_plain()} for detail in reversed(details)
    ]
