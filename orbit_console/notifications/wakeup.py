"""Waking the delivery worker when there is something to send, so that it need not wait for
its next poll (docs/notifications.md, "Delivery").

At the bottom of the app: what writes (the outbox, a replay) asks for a wake-up here once its
transaction commits, and the worker (``worker.py``) listens here, so neither imports the other.
A wake-up reaches the workers of the committing process at once, and, where processes share a
channel layer (Redis), every worker of every process through the channel-layer group
``WAKE_GROUP``. A wake-up that is lost costs at most one poll (``notify deliver --interval``).
"""

import threading
from collections.abc import Callable

from django.db import transaction

from orbit_console.lib.live import publish
from orbit_console.ops.workers import shares_channel_layer

WAKE_GROUP = "orbit.notifier"
WAKE_MESSAGE = "notifier.wake"

_listeners: list[Callable[[], None]] = []
_lock = threading.Lock()


def listen(callback: Callable[[], None]) -> None:
    """Call ``callback`` (from any thread; it must return at once) on every wake-up of this
    process."""
    with _lock:
        _listeners.append(callback)


def forget(callback: Callable[[], None]) -> None:
    with _lock:
        if callback in _listeners:
            _listeners.remove(callback)


def wake() -> None:
    """Wake this process's workers."""
    with _lock:
        listeners = list(_listeners)
    for callback in listeners:
        callback()


def wake_everywhere() -> None:
    """Wake this process's workers and, through a shared channel layer, every other's."""
    wake()
    if shares_channel_layer():
        publish(WAKE_GROUP, {"type": WAKE_MESSAGE})


def wake_on_commit() -> None:
    """Wake every worker once the current transaction commits (nothing if it rolls back)."""
    transaction.on_commit(wake_everywhere)
