"""The console's feed, run in the test's own process against a hostile Orbit of the test's own
(tests/support/hostile.py): what the suites that drive it share (tests/feed/test_consumer.py,
tests/insight/test_external.py)."""

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.utils import timezone

from orbit_console.feed.consumer import Feed
from orbit_console.feed.models import Leadership, Source
from orbit_console.lib.ids import new_id
from orbit_console.lib.secretbox import seal
from tests.support.hostile import HostileOrbit

WAIT = 40.0  # generous: two cores and other suites at once; never a timing assertion


def consumed(settings: Any, hostile: HostileOrbit) -> Iterator[Source]:
    """For a ``source`` fixture: the console consumes the hostile Orbit's stream, as an external
    Orbit's (``ORBIT_API_URL``), with a short lease; no other source is consumed."""
    settings.ORBIT_API_URL = hostile.url
    settings.ORBIT_API_EMBEDDED = False
    settings.CONSOLE_FEED_LEASE_SECONDS = 1
    settings.ORBIT_API_TIMEOUT = 5.0
    settings.ORBIT_API_MAX_ANSWER_BYTES = 64 * 1024
    Source.objects.all().delete()
    Leadership.objects.all().delete()
    source = Source.objects.create(
        namespace_id=new_id(),
        subscription_id=hostile.subscription_id,
        token_ciphertext=seal("hostile-token"),
        label="hostile",
        created_at=timezone.now(),
    )
    yield source
    Source.objects.filter(id=source.id).delete()
    Leadership.objects.all().delete()


@contextlib.asynccontextmanager
async def feeding() -> AsyncIterator[Feed]:
    """The feed of this process (the candidate that takes the lease), until the block ends."""
    stop = asyncio.Event()
    feed = Feed(stop)
    running = asyncio.create_task(feed.run())
    try:
        yield feed
    finally:
        stop.set()
        await asyncio.wait_for(running, WAIT)


async def until[T](read: Callable[[], T], check: Callable[[T], bool], what: str) -> T:
    deadline = time.monotonic() + WAIT
    while True:
        value = await sync_to_async(read)()
        if check(value):
            return value
        assert time.monotonic() < deadline, f"{what}: still {value!r}"
        await asyncio.sleep(0.1)
