"""The live timeline between real processes (issue 4): daphne servers, real WebSocket clients
(``websockets``, with the Origin and the session cookie a browser sends) and reviews made over
HTTP through the recovery API.

- one server: the review reaches the socket of the server whose API committed it;
- two servers sharing the Redis channel layer: a review committed through A reaches a socket
  held by B;
- an external-Orbit console (``ORBIT_API_URL`` set, no shared channel layer): its watcher polls
  the API and feeds the same groups.
"""

import asyncio
import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import redis
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.typing import Origin

from orbit_console.lib.live import CLOSE_UNAUTHENTICATED
from tests.support.orbit import bearer, new_key, review_body
from tests.support.people import TestPerson, make_person, make_reader
from tests.support.servers import DaphneServer
from tests.timeline.helpers import (
    REASON_ESCAPED,
    REASON_WITH_MARKUP,
    session_cookie,
    timeline_path,
)

SHARED_REDIS_URL = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/9"
ARRIVAL_TIMEOUT = 30  # generous: two cores, other suites at once; never a timing assertion


@pytest.fixture(scope="module")
def redis_servers(django_db_setup: None, django_db_blocker: Any) -> Iterator[list[DaphneServer]]:
    """Two daphne processes on the test database sharing the Redis channel layer."""
    try:
        redis.Redis.from_url(SHARED_REDIS_URL, socket_timeout=3).ping()
    except redis.RedisError as error:
        pytest.skip(f"no Redis answers PING at {SHARED_REDIS_URL} ({error})")
    servers: list[DaphneServer] = []
    try:
        with django_db_blocker.unblock():
            for name in ("timeline-a", "timeline-b"):
                servers.append(DaphneServer(name, env={"REDIS_URL": SHARED_REDIS_URL}).start())
        yield servers
    finally:
        for server in servers:
            server.stop()


@pytest.fixture(scope="module")
def external_console(orbit_server: DaphneServer, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """A console whose Orbit is ``orbit_server`` reached as an external API: no in-process
    announcements reach it and it shares no channel layer with it (``REDIS_URL`` empty)."""
    with django_db_blocker.unblock():
        server = DaphneServer(
            "timeline-external", env={"ORBIT_API_URL": orbit_server.url, "REDIS_URL": ""}
        ).start()
    yield server
    server.stop()


def socket_url(server: DaphneServer, task_id: str) -> str:
    return server.url.replace("http://", "ws://", 1) + timeline_path(task_id)


def open_socket(
    server: DaphneServer, task_id: str, session: str | None, *, origin: str = ""
) -> connect:
    """A client socket on the task's timeline, as a browser on ``origin`` (default: the
    server's own) with the session cookie."""
    headers = {"Cookie": f"sessionid={session}"} if session else {}
    return connect(
        socket_url(server, task_id),
        origin=Origin(origin or server.url),
        additional_headers=headers,
        proxy=None,
        open_timeout=ARRIVAL_TIMEOUT,
    )


async def entry_arrives(socket: ClientConnection, entry_id: str) -> str:
    """Read pushes until the one carrying ``entry_id``; fail if it does not come."""
    async with asyncio.timeout(ARRIVAL_TIMEOUT):
        while True:
            message = await socket.recv()
            assert isinstance(message, str)
            if f'id="{entry_id}"' in message:
                return message


async def review_over_http(server: DaphneServer, world: dict[str, Any], task: str) -> str:
    """Review a task through ``server``'s recovery API with the admin token; the audit id."""
    async with httpx.AsyncClient(base_url=server.url, timeout=ARRIVAL_TIMEOUT) as client:
        response = await client.post(
            f"/v1/tasks/{world['tasks'][task]}:review",
            json=review_body(reason=REASON_WITH_MARKUP),
            headers={**bearer(world["tokens"]["admin"]), "Idempotency-Key": new_key()},
        )
    assert response.status_code == 200, response.text
    audit_id: str = response.json()["data"]["audit_id"]
    return audit_id


def assert_review_entry(fragment: str, audit_id: str) -> None:
    assert f'id="entry-op-{audit_id}"' in fragment
    assert 'hx-swap-oob="afterbegin:#timeline-entries"' in fragment
    assert REASON_ESCAPED in fragment


# --- One process --------------------------------------------------------------------------


def test_review_through_the_api_reaches_an_auditors_socket(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """AU2: the audit record of a review committed over HTTP is pushed to the open socket."""
    task_id = world["tasks"]["needs_review"]
    session = session_cookie(people["auditor"].user)

    async def scenario() -> None:
        async with open_socket(orbit_server, task_id, session) as socket:
            audit_id = await review_over_http(orbit_server, world, "needs_review")
            assert_review_entry(await entry_arrives(socket, f"entry-op-{audit_id}"), audit_id)

    asyncio.run(scenario())


def test_real_server_refuses_foreign_origins_strangers_and_people_without_audit_read(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The handshake itself is refused (HTTP 403): the socket never opens. A stranger without a
    session is told so instead (accepted, then closed with 4401), so that the page can say
    "signed out" rather than retry for ever."""
    task_id = world["tasks"]["needs_review"]
    attempts = [
        (session_cookie(people["auditor"].user), "http://evil.example"),
        (session_cookie(make_reader(world, "operator").user), ""),
    ]

    async def scenario() -> None:
        for session, origin in attempts:
            with pytest.raises(InvalidStatus) as refused:
                async with open_socket(orbit_server, task_id, session, origin=origin):
                    pass
            assert refused.value.response.status_code == 403
        async with open_socket(orbit_server, task_id, None) as socket:
            with pytest.raises(ConnectionClosed) as closed:
                await asyncio.wait_for(socket.recv(), ARRIVAL_TIMEOUT)
        assert closed.value.rcvd is not None and closed.value.rcvd.code == CLOSE_UNAUTHENTICATED

    asyncio.run(scenario())


# --- Two processes sharing Redis --------------------------------------------------------------


def test_review_through_process_a_reaches_sockets_on_a_and_on_b(
    redis_servers: list[DaphneServer], world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """With REDIS_URL set the processes share the channel layer: a review committed by A's
    API is pushed by B to its own viewers."""
    server_a, server_b = redis_servers
    task_id = world["tasks"]["needs_review"]
    on_b = session_cookie(people["auditor"].user)
    on_a = session_cookie(make_person(world, "supervisor", "auditor").user)

    async def scenario() -> None:
        async with (
            open_socket(server_b, task_id, on_b) as socket_b,
            open_socket(server_a, task_id, on_a) as socket_a,
        ):
            audit_id = await review_over_http(server_a, world, "needs_review")
            entry_id = f"entry-op-{audit_id}"
            assert_review_entry(await entry_arrives(socket_b, entry_id), audit_id)
            assert_review_entry(await entry_arrives(socket_a, entry_id), audit_id)

    asyncio.run(scenario())


def test_a_socket_idle_longer_than_a_redis_read_timeout_still_receives(
    redis_servers: list[DaphneServer], world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The Redis layer's consumers block on Redis for up to 5 s at a time; a client-side read
    timeout of 5 s (redis-py's default) once killed every socket idle that long. The settings
    turn it off: a socket idle for 7 s still gets the next entry."""
    server_a, server_b = redis_servers
    task_id = world["tasks"]["needs_review_2"]
    session = session_cookie(people["auditor"].user)

    async def scenario() -> None:
        async with open_socket(server_b, task_id, session) as socket:
            await asyncio.sleep(7)  # idle, not measured: longer than the old read timeout
            audit_id = await review_over_http(server_a, world, "needs_review_2")
            assert_review_entry(await entry_arrives(socket, f"entry-op-{audit_id}"), audit_id)

    asyncio.run(scenario())


# --- An external Orbit --------------------------------------------------------------------------


def test_external_orbit_console_watches_and_pushes_a_review_made_elsewhere(
    external_console: DaphneServer,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """I4: with ORBIT_API_URL set there is no in-process hook; the watcher polls the API (from
    1 s, bounded backoff) and feeds the same group. The review is made on orbit_server, which
    shares no channel layer with this console."""
    task_id = world["tasks"]["needs_review"]
    session = session_cookie(people["auditor"].user)

    async def scenario() -> None:
        async with open_socket(external_console, task_id, session) as socket:
            audit_id = await review_over_http(orbit_server, world, "needs_review")
            assert_review_entry(await entry_arrives(socket, f"entry-op-{audit_id}"), audit_id)

    asyncio.run(scenario())
