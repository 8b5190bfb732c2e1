"""The live timeline's consumer (issue 4) under ``WebsocketCommunicator``, in this process.

The consumer runs here, against ``orbit_console.asgi.application`` (Origin check, session
authentication, routing); its authorisation calls go over HTTP to the real recovery API of
``orbit_server`` (the ``settings`` fixture points ``ORBIT_API_URL`` there). Changes are made in
this process through the ledger's services inside ``sync_to_async``, so that the
``transaction.on_commit`` publishing runs on this event loop and reaches the consumer through
this process's channel layer (in memory, or Redis when ``REDIS_URL`` is set).
"""

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from channels.testing import WebsocketCommunicator
from prometheus_client import REGISTRY
from pytest_django.fixtures import Settings as SettingsWrapper

from orbit_console.asgi import application
from orbit_console.lib.live import (
    CLOSE_FORBIDDEN,
    CLOSE_UNAUTHENTICATED,
    CONSOLE_EVENT_MESSAGE,
    OPERATION_MESSAGE,
    task_group,
)
from tests.support.people import TestPerson, make_person, make_reader
from tests.support.servers import DaphneServer
from tests.timeline.helpers import (
    REASON_ESCAPED,
    REASON_WITH_MARKUP,
    console_submission,
    review_in_process,
    review_rolled_back,
    revoke_person,
    session_cookie,
    socket_headers,
    timeline_path,
)

ORIGIN = "http://127.0.0.1"
RECEIVE_TIMEOUT = 20  # two cores and other suites at once: generous, never a timing assertion


@pytest.fixture(autouse=True)
def consumer_talks_to_orbit_server(
    settings: SettingsWrapper, orbit_server: DaphneServer, live_db: None
) -> None:
    settings.ORBIT_API_URL = orbit_server.url


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


def communicator(
    task_id: str, person: TestPerson | None = None, *, origin: str | None = ORIGIN
) -> WebsocketCommunicator:
    session = session_cookie(person.user) if person is not None else None
    return WebsocketCommunicator(
        application,
        timeline_path(task_id),
        headers=socket_headers(origin=origin, session=session),
    )


async def refused_with(socket: WebsocketCommunicator) -> int | None:
    """Connect and return the close code of a refusal (``None`` if closed without one)."""
    connected, code = await socket.connect(timeout=RECEIVE_TIMEOUT)
    if connected:
        await socket.disconnect()
        pytest.fail("the socket was accepted")
    return code if isinstance(code, int) else None


# --- Who may connect ------------------------------------------------------------------------


def test_unauthenticated_socket_is_refused(world: dict[str, Any]) -> None:
    """Accepted only to be closed with 4401 at once (ops/sockets.SessionWatch): a refused
    handshake would reach the page as 1006, which it retries, and it must say "signed out"."""
    socket = communicator(world["tasks"]["needs_review"])

    async def scenario() -> None:
        connected, _ = await socket.connect(timeout=RECEIVE_TIMEOUT)
        assert connected
        closed = await socket.receive_output(timeout=RECEIVE_TIMEOUT)
        assert closed == {"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED}

    run(scenario)


def test_socket_from_a_foreign_origin_is_refused_even_when_signed_in(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    socket = communicator(
        world["tasks"]["needs_review"], people["auditor"], origin="http://evil.example"
    )

    async def scenario() -> None:
        connected, _code = await socket.connect(timeout=RECEIVE_TIMEOUT)
        assert connected is False

    run(scenario)


def test_socket_without_an_origin_is_refused(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    socket = communicator(world["tasks"]["needs_review"], people["auditor"], origin=None)

    async def scenario() -> None:
        connected, _code = await socket.connect(timeout=RECEIVE_TIMEOUT)
        assert connected is False

    run(scenario)


def test_person_without_audit_permission_is_refused_with_4403(
    world: dict[str, Any], live_db: None
) -> None:
    """An operator whose credential does not hold tasks:audit:read (a token issued elsewhere,
    AU1)."""
    socket = communicator(world["tasks"]["needs_review"], make_reader(world, "operator"))

    async def scenario() -> None:
        assert await refused_with(socket) == CLOSE_FORBIDDEN

    run(scenario)


def test_auditor_of_another_namespace_is_refused_with_4403(
    world: dict[str, Any], live_db: None
) -> None:
    """The auditor holds tasks:audit:read, but the API does not show them this task (I1)."""
    from orbit_console.ledger.seed import seed_world

    elsewhere = make_person(seed_world(label="elsewhere"), "auditor")
    socket = communicator(world["tasks"]["needs_review"], elsewhere)

    async def scenario() -> None:
        assert await refused_with(socket) == CLOSE_FORBIDDEN

    run(scenario)


def test_socket_for_something_that_is_not_a_task_id_is_refused(
    people: dict[str, TestPerson],
) -> None:
    socket = communicator("not-an-id", people["auditor"])

    async def scenario() -> None:
        assert await refused_with(socket) == CLOSE_FORBIDDEN

    run(scenario)


def test_auditor_of_the_tasks_namespace_is_accepted_and_the_socket_only_listens(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    socket = communicator(world["tasks"]["needs_review"], people["auditor"])

    async def scenario() -> None:
        connected, _ = await socket.connect(timeout=RECEIVE_TIMEOUT)
        assert connected is True
        await socket.send_to(text_data="hello")  # the page only listens
        assert await socket.receive_nothing(timeout=0.5)
        await socket.disconnect()

    run(scenario)


# --- What is pushed -------------------------------------------------------------------------


def test_committed_review_arrives_as_an_out_of_band_entry_with_its_escaped_reason(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """AU2/AU5: the new audit record, rendered by the page's own partial, after the commit."""
    socket = communicator(world["tasks"]["needs_review"], people["auditor"])

    async def scenario() -> None:
        connected, _ = await socket.connect(timeout=RECEIVE_TIMEOUT)
        assert connected
        audit_id = await sync_to_async(review_in_process)(world)
        fragment = await socket.receive_from(timeout=RECEIVE_TIMEOUT)
        assert f'id="entry-op-{audit_id}"' in fragment
        assert 'hx-swap-oob="afterbegin:#timeline-entries"' in fragment
        assert "source-platform" in fragment
        assert REASON_ESCAPED in fragment
        assert REASON_WITH_MARKUP not in fragment
        assert "<b>" not in fragment
        await socket.disconnect()

    run(scenario)


def test_console_event_arrives_as_an_event_entry(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    socket = communicator(world["tasks"]["needs_review"], people["auditor"])
    operator = people["operator"].user

    async def scenario() -> None:
        connected, _ = await socket.connect(timeout=RECEIVE_TIMEOUT)
        assert connected
        event_id = await sync_to_async(console_submission)(world, operator)
        fragment = await socket.receive_from(timeout=RECEIVE_TIMEOUT)
        assert f'id="entry-ev-{event_id}"' in fragment
        assert "source-console" in fragment
        assert operator.get_username() in fragment
        await socket.disconnect()

    run(scenario)


def test_rolled_back_review_publishes_nothing(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Only committed changes are announced (transaction.on_commit): a rolled-back review is
    never seen; the next committed one is, with its own id."""
    socket = communicator(world["tasks"]["needs_review"], people["auditor"])

    async def scenario() -> None:
        connected, _ = await socket.connect(timeout=RECEIVE_TIMEOUT)
        assert connected
        rolled_back_id = await sync_to_async(review_rolled_back)(world)
        assert rolled_back_id
        assert await socket.receive_nothing(timeout=1)
        audit_id = await sync_to_async(review_in_process)(world)
        fragment = await socket.receive_from(timeout=RECEIVE_TIMEOUT)
        assert f'id="entry-op-{audit_id}"' in fragment
        assert rolled_back_id not in fragment
        await socket.disconnect()

    run(scenario)


def test_messages_about_another_task_are_ignored(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Even if a message for another task reached this task's group, it is not pushed."""
    task_id = world["tasks"]["needs_review"]
    other_id = world["tasks"]["needs_review_2"]
    socket = communicator(task_id, people["auditor"])
    operation = {
        "id": "0" * 26,
        "task_id": other_id,
        "operation_id": "1" * 26,
        "actor_id": "a" * 32,
        "action": "task.review",
        "created_at": "2030-01-01T00:00:00.000000Z",
        "reason": "not for this task",
        "before": {"state": "NEEDS_REVIEW", "revision": "3"},
        "after": {"state": "FAILED", "revision": "4"},
    }
    event = {
        "id": "1",
        "kind": "submission.stored",
        "task_id": other_id,
        "created_at": "2030-01-01T00:00:00.000000Z",
        "actor": "",
        "note": "",
        "submission_id": "",
    }

    async def scenario() -> None:
        connected, _ = await socket.connect(timeout=RECEIVE_TIMEOUT)
        assert connected
        layer = get_channel_layer()
        assert layer is not None
        group = task_group(task_id)
        await layer.group_send(group, {"type": OPERATION_MESSAGE, "operation": operation})
        await layer.group_send(group, {"type": CONSOLE_EVENT_MESSAGE, "event": event})
        assert await socket.receive_nothing(timeout=1)
        await socket.disconnect()

    run(scenario)


def test_revoked_credential_closes_the_socket_at_the_next_recheck(
    world: dict[str, Any], people: dict[str, TestPerson], settings: SettingsWrapper
) -> None:
    """Authorisation is re-checked against the API with the person's own credential: once it
    is revoked the socket closes with 4403 and delivers nothing more."""
    settings.TIMELINE_RECHECK_SECONDS = 1
    auditor = make_person(world, "auditor")
    socket = communicator(world["tasks"]["needs_review"], auditor)

    async def scenario() -> None:
        connected, _ = await socket.connect(timeout=RECEIVE_TIMEOUT)
        assert connected
        audit_id = await sync_to_async(review_in_process)(world, task="needs_review")
        assert f"entry-op-{audit_id}" in await socket.receive_from(timeout=RECEIVE_TIMEOUT)

        await sync_to_async(revoke_person)(auditor.user)
        closed = await socket.receive_output(timeout=RECEIVE_TIMEOUT)
        assert closed == {"type": "websocket.close", "code": CLOSE_FORBIDDEN}

        await sync_to_async(console_submission)(world, people["operator"].user)
        assert await socket.receive_nothing(timeout=1)
        await socket.disconnect()

    run(scenario)


def test_sockets_of_one_person_on_one_task_share_one_authorisation(
    world: dict[str, Any], settings: SettingsWrapper
) -> None:
    """Issue 12: keeping viewers authorised costs one API call per person and task, not one
    per socket — also when the sockets connect at the same moment (one call in flight)."""
    settings.TIMELINE_RECHECK_SECONDS = 60  # no periodic re-check inside the test
    auditor, other = make_person(world, "auditor"), make_person(world, "auditor")
    task_id = world["tasks"]["needs_review"]
    sockets = [communicator(task_id, auditor) for _ in range(5)]

    def checks() -> float:
        """The console's authorisation calls so far (the client's own counter)."""
        labels = {"operation": "ListTaskOperations", "outcome": "200"}
        return REGISTRY.get_sample_value("orbit_recovery_api_calls_total", labels) or 0.0

    async def scenario() -> None:
        before = checks()
        connected = await asyncio.gather(*(s.connect(timeout=RECEIVE_TIMEOUT) for s in sockets))
        assert [ok for ok, _ in connected] == [True] * 5
        assert checks() - before == 1
        late = communicator(task_id, auditor)
        assert (await late.connect(timeout=RECEIVE_TIMEOUT))[0]
        assert checks() - before == 1
        someone_else = communicator(task_id, other)
        assert (await someone_else.connect(timeout=RECEIVE_TIMEOUT))[0]
        assert checks() - before == 2
        # Every socket still gets the push.
        audit_id = await sync_to_async(review_in_process)(world, task="needs_review")
        for socket in [*sockets, late, someone_else]:
            assert f"entry-op-{audit_id}" in await socket.receive_from(timeout=RECEIVE_TIMEOUT)
            await socket.disconnect()

    run(scenario)
