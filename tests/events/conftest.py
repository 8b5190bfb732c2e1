"""A server of the event stream with short heartbeats, polls and re-checks, so that what takes
seconds by default takes a fraction of one here; and helpers to subscribe and stream."""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orbit_console.client.events import EventStreamConnection, open_stream
from tests.support.orbit import bearer, new_key
from tests.support.servers import DaphneServer

FAST_STREAMS = {
    "ORBIT_EVENTS_HEARTBEAT_MS": "400",
    "ORBIT_EVENTS_POLL_MS": "100",
    "ORBIT_EVENTS_RECHECK_SECONDS": "1",
}


@pytest.fixture(scope="session")
def stream_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    with django_db_blocker.unblock():
        server = DaphneServer("events", env=FAST_STREAMS).start()
    yield server
    server.stop()


@pytest.fixture
def stream_api(stream_server: DaphneServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=stream_server.url, timeout=30) as client:
        yield client


def subscribe(api: httpx.Client, token: str, **body: Any) -> dict[str, Any]:
    """Create a subscription over the API; its detail."""
    response = api.post(
        "/v1/subscriptions",
        json={"name": "test", **body},
        headers={**bearer(token), "Idempotency-Key": new_key()},
    )
    assert response.status_code == 201, response.text
    data: dict[str, Any] = response.json()["data"]
    return data


async def stream(
    server: DaphneServer, token: str, subscription_id: str, *, capacity: int = 8
) -> EventStreamConnection:
    return await open_stream(
        server.url, token, subscription_id, origin=server.url, capacity=capacity
    )
