"""The event stream's limits (issue 29, docs/events.md "Limits"): subscriptions per credential
and per namespace, open streams per credential and per namespace, counted across processes;
each refusal a 429 in the API's envelope. One credential had made 2 000 subscriptions (every
later write then owed 2 000 rows) and 300 streams, which slowed every page of the console.

Two server processes with small limits share the test database; the streams of one that is
killed stop counting once their lease (three re-checks) has run out."""

import asyncio
import json
import os
import signal
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import httpx
import pytest
from django.utils import timezone
from websockets.asyncio.client import connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Origin, Subprotocol

from orbit_console.events.models import OpenStream
from orbit_console.ledger.lifecycle import credential_issue
from orbit_console.ledger.models import Namespace
from tests.events.conftest import FAST_STREAMS
from tests.ledger.test_openapi import response_schema, validator
from tests.support.orbit import bearer, new_key
from tests.support.servers import DaphneServer

WAIT = 30.0  # generous: a condition is waited on, never a time
LIMITS = {
    **FAST_STREAMS,
    "ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_CREDENTIAL": "2",
    "ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_NAMESPACE": "3",
    "ORBIT_EVENTS_MAX_STREAMS_PER_CREDENTIAL": "2",
    "ORBIT_EVENTS_MAX_STREAMS_PER_NAMESPACE": "3",
}


@pytest.fixture(scope="module")
def limited(django_db_setup: None, django_db_blocker: Any) -> Iterator[list[DaphneServer]]:
    """Two processes serving the API and its streams, with small limits."""
    with django_db_blocker.unblock():
        servers = [DaphneServer(f"limits-{n}", env=LIMITS).start() for n in (1, 2)]
    yield servers
    for server in servers:
        server.stop()


@pytest.fixture
def two_tokens(world: dict[str, Any]) -> tuple[str, str]:
    namespace = Namespace.objects.get(id=world["namespace_id"])
    _, other = credential_issue(
        namespace=namespace, actor_name="second-consumer", permissions=["events:subscribe"]
    )
    return world["tokens"]["subscriber"], other


def create(server: DaphneServer, token: str, key: str | None = None) -> httpx.Response:
    return httpx.post(
        f"{server.url}/v1/subscriptions",
        json={"name": "limited"},
        headers={**bearer(token), "Idempotency-Key": key or new_key()},
        timeout=WAIT,
    )


def assert_limit(response: httpx.Response, code: str) -> None:
    """A 429 in the API's envelope, as the OpenAPI document describes it."""
    assert response.status_code == 429, response.text
    body = response.json()
    assert body["error"]["code"] == code
    assert body["request_id"] == response.headers["X-Request-Id"]
    document = httpx.get(str(response.url.copy_with(path="/v1/openapi.json"))).json()
    schema = response_schema(document, "/v1/subscriptions", "post", 429)
    validator(document, schema).validate(body)


def test_subscriptions_are_limited_per_credential_and_per_namespace(
    limited: list[DaphneServer], two_tokens: tuple[str, str]
) -> None:
    """O3: a replay answers before the limit is judged; a deleted subscription makes room."""
    mine, theirs = two_tokens
    server = limited[0]
    first_key = new_key()
    first = create(server, mine, first_key)
    assert first.status_code == 201
    assert create(server, mine).status_code == 201
    assert_limit(create(server, mine), "SUBSCRIPTION_LIMIT")  # two per credential
    assert create(server, mine, first_key).status_code == 200  # the replay still answers
    assert create(limited[1], theirs).status_code == 201
    assert_limit(create(limited[1], theirs), "SUBSCRIPTION_LIMIT")  # three per namespace
    deleted = httpx.delete(
        f"{server.url}/v1/subscriptions/{first.json()['data']['id']}", headers=bearer(mine)
    )
    assert deleted.status_code == 200
    assert create(limited[1], theirs).status_code == 201


class Streams:
    """Streams held open against the limited servers, closed at the end."""

    def __init__(self, subscriptions: dict[str, str]) -> None:
        self.subscriptions = subscriptions  # token -> its subscription
        self.open: list[Any] = []

    async def open_one(self, server: DaphneServer, token: str) -> tuple[int, dict[str, Any]]:
        path = f"/v1/subscriptions/{self.subscriptions[token]}/events"
        try:
            socket = await connect(
                f"ws://127.0.0.1:{server.port}{path}",
                subprotocols=[Subprotocol("orbit.events.v1")],
                additional_headers=bearer(token),
                origin=Origin(server.url),
            )
        except InvalidStatus as refused:
            response = refused.response
            body = json.loads(bytes(response.body or b"{}"))
            assert body["request_id"] == response.headers["X-Request-Id"]
            return response.status_code, body
        await asyncio.wait_for(socket.recv(), WAIT)  # welcome
        self.open.append(socket)
        return 101, {}

    async def close_all(self) -> None:
        for socket in self.open:
            await socket.close()


def code_of(answer: tuple[int, dict[str, Any]]) -> tuple[int, str]:
    return answer[0], answer[1].get("error", {}).get("code", "")


def test_open_streams_are_limited_per_credential_and_per_namespace_across_processes(
    limited: list[DaphneServer], two_tokens: tuple[str, str]
) -> None:
    mine, theirs = two_tokens
    streams = Streams(
        {token: create(limited[0], token).json()["data"]["id"] for token in two_tokens}
    )
    first, second = limited

    async def scenario() -> None:
        try:
            assert code_of(await streams.open_one(first, mine)) == (101, "")
            assert code_of(await streams.open_one(second, mine)) == (101, "")
            # Two open, one in each process: a third is refused by either.
            assert code_of(await streams.open_one(first, mine)) == (429, "STREAM_LIMIT")
            assert code_of(await streams.open_one(second, mine)) == (429, "STREAM_LIMIT")
            assert code_of(await streams.open_one(second, theirs)) == (101, "")
            # Three open in the namespace: the other credential's second is refused too.
            assert code_of(await streams.open_one(first, theirs)) == (429, "STREAM_LIMIT")
            # A stream that closes makes room at once.
            await streams.open.pop(0).close()
            answer = (0, {})
            for _ in range(int(WAIT * 10)):
                answer = await streams.open_one(first, theirs)
                if answer[0] == 101:
                    break
                await asyncio.sleep(0.1)  # the closing stream's row goes with its disconnect
            assert code_of(answer) == (101, "")
        finally:
            await streams.close_all()

    asyncio.run(scenario())


def test_the_streams_of_a_killed_process_stop_counting_after_their_lease(
    limited: list[DaphneServer], two_tokens: tuple[str, str], world: dict[str, Any]
) -> None:
    """A process killed with streams open cannot remove their rows: they stop counting once
    their lease (three re-checks: 3 s here, 15 s by default) has run out, and the next
    admission in the namespace deletes them."""
    mine, _ = two_tokens
    streams = Streams({mine: create(limited[0], mine).json()["data"]["id"]})
    doomed = DaphneServer("limits-killed", env=LIMITS).start()
    left: list[str] = []
    attempted: list[datetime] = []

    async def scenario() -> tuple[int, str]:
        try:
            assert code_of(await streams.open_one(doomed, mine)) == (101, "")
            assert code_of(await streams.open_one(doomed, mine)) == (101, "")
            rows = OpenStream.objects.filter(namespace_id=world["namespace_id"])
            left.extend(await asyncio.to_thread(lambda: list(rows.values_list("id", flat=True))))
            assert len(left) == 2
            assert doomed.process is not None
            os.kill(doomed.process.pid, signal.SIGKILL)
            doomed.process.wait()
            assert code_of(await streams.open_one(limited[0], mine)) == (429, "STREAM_LIMIT")
            deadline = time.monotonic() + WAIT
            answer = (0, {})
            while time.monotonic() < deadline:
                attempted.append(timezone.now())
                answer = await streams.open_one(limited[0], mine)
                if answer[0] == 101:
                    break
                await asyncio.sleep(0.2)
            return code_of(answer)
        finally:
            await streams.close_all()

    try:
        assert asyncio.run(scenario()) == (101, "")
    finally:
        doomed.stop()
    # The killed process's rows that had lapsed were dropped by that admission, not left to
    # pile up (the two lapse a moment apart: the second may not have yet).
    assert not OpenStream.objects.filter(id__in=left, expires_at__lte=attempted[-1]).exists()
