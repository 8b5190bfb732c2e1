"""``lib/live``: in a server process a commit's notification is handed to the process's outbox
and sent from its event loop, in commit order, without holding the thread that committed
(issue 12); elsewhere it is sent before ``publish`` returns."""

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from channels.layers import get_channel_layer
from django.test import override_settings

from orbit_console.lib import live
from orbit_console.lib.ids import new_id
from tests.support.silent import silent_server


def failures() -> float:
    """The publish failures counted so far (read from the counter itself: the registry's other
    collectors read the database)."""
    [family] = live.PUBLISH_FAILURES.collect()
    return next(sample.value for sample in family.samples if sample.name.endswith("_total"))


class ServerLoop:
    """An event loop in a thread of its own that took up publishing, as a server's does."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self) -> "ServerLoop":
        self.thread.start()
        self.run(self._serve())
        return self

    @staticmethod
    async def _serve() -> None:
        live.serve_from_running_loop()

    def run(self, coroutine: Any, timeout: float = 10) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(timeout)

    def __exit__(self, *exc: object) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


@pytest.fixture
def server_loop() -> Iterator[ServerLoop]:
    with ServerLoop() as loop:
        yield loop
    live._outbox = None


def test_notifications_leave_in_commit_order_from_the_servers_loop(
    server_loop: ServerLoop,
) -> None:
    layer = get_channel_layer()
    group = live.task_group(new_id())
    channel = server_loop.run(layer.new_channel())
    server_loop.run(layer.group_add(group, channel))
    for number in range(50):  # from this thread, as the sync thread publishes after a commit
        assert live.publish(group, {"type": "console.event", "event": {"n": number}}) is True

    async def receive_all() -> list[int]:
        return [(await layer.receive(channel))["event"]["n"] for _ in range(50)]

    assert server_loop.run(receive_all()) == list(range(50))


def test_a_hung_channel_layer_never_holds_the_thread_that_committed(
    server_loop: ServerLoop,
) -> None:
    """Before the outbox, the committing thread waited for the channel layer, up to the
    publish timeout (500 ms by default) on a hung Redis; now it goes on at once, and the
    notification that could not go out is still counted once the timeout passes."""
    before = failures()
    with silent_server() as silent:
        hung = silent.as_channel_layer()
        with override_settings(CHANNEL_LAYERS=hung, ORBIT_PUBLISH_TIMEOUT=0.3):
            started = time.monotonic()
            for _ in range(3):
                assert live.publish(live.task_group(new_id()), {"type": "console.event"}) is True
            held = time.monotonic() - started
            deadline = time.monotonic() + 15
            while failures() < before + 3 and time.monotonic() < deadline:
                time.sleep(0.05)
    assert held < 0.2, f"publishing held the committing thread for {held:.2f} s"
    assert failures() == before + 3


def test_a_full_outbox_drops_and_counts(server_loop: ServerLoop) -> None:
    outbox = live._outbox
    assert outbox is not None
    outbox.capacity = 0
    before = failures()
    assert live.publish(live.task_group(new_id()), {"type": "console.event"}) is True
    server_loop.run(asyncio.sleep(0))  # the loop took the message, and refused it
    assert failures() == before + 1


def test_without_a_running_server_loop_a_notification_is_sent_before_publish_returns() -> None:
    """A management command, the reconciler, a script: no server loop took up publishing (or
    the one that did has closed), so ``publish`` sends, and ``True`` means "sent"."""
    with ServerLoop():
        pass  # a server loop that has since closed
    layer = get_channel_layer()
    group = live.task_group(new_id())
    channel = asyncio.run(layer.new_channel())
    asyncio.run(layer.group_add(group, channel))
    try:
        assert live.publish(group, {"type": "console.event", "event": {}}) is True
        assert live._outbox is not None  # still the closed loop's: it was not used
    finally:
        live._outbox = None
    received = asyncio.run(asyncio.wait_for(layer.receive(channel), 5))
    assert received["type"] == "console.event"
