"""Every console socket stays authorised (issue 29), as the timeline's do: a real server, real
WebSocket clients with the session cookie a browser sends, and access taken away in the
database while the socket is open. The server re-checks every ``CONSOLE_ACCESS_SECONDS`` (1 s
here) and closes with 4403; nothing is pushed on the earlier answer past twice that."""

import asyncio
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from orbit_console.console.consumers import rows_token
from orbit_console.decisions import batches
from orbit_console.decisions.models import BatchItem
from orbit_console.ledger.seed import seed_incident
from orbit_console.lib.live import CLOSE_FORBIDDEN
from orbit_console.people.credentials import credential_drop, person_roles_set
from tests.decisions.test_batches import DECISION, select
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer
from tests.timeline.helpers import session_cookie

WAIT = 30  # generous: two cores and other suites at once; never a timing assertion
PERIOD = 1  # CONSOLE_ACCESS_SECONDS of the server below


@pytest.fixture(scope="module")
def rechecking(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """API and console re-checking sockets every second; the batch worker in the server,
    sending one item a second (pushes keep coming)."""
    with django_db_blocker.unblock():
        server = DaphneServer(
            "rechecking",
            env={
                "CONSOLE_ACCESS_SECONDS": str(PERIOD),
                "CONSOLE_BATCH_WORKER": "server",
                "CONSOLE_BATCH_RATE": "1",
                "CONSOLE_BATCH_CONCURRENCY": "1",
            },
        ).start()
    yield server
    server.stop()


async def open_socket(server: DaphneServer, path: str, person: TestPerson) -> ClientConnection:
    cookie = f"sessionid={await asyncio.to_thread(session_cookie, person.user)}"
    url = server.url.replace("http://", "ws://", 1) + path
    return await connect(
        url, origin=Origin(server.url), additional_headers={"Cookie": cookie}, proxy=None
    )


async def pushes_until_closed(socket: ClientConnection) -> tuple[list[str], int | None]:
    """What the socket receives until the server closes it, and the close code."""
    received: list[str] = []
    async with asyncio.timeout(WAIT):
        try:
            while True:
                received.append(str(await socket.recv()))
        except ConnectionClosed:
            pass
    return received, socket.close_code


def closes_when(
    server: DaphneServer, path: str, person: TestPerson, take_away: Callable[[], object]
) -> tuple[list[str], int | None, float]:
    """Open the socket, take access away, and wait for the server to close it: what it pushed
    meanwhile, the code, and how long it took."""

    async def scenario() -> tuple[list[str], int | None, float]:
        socket = await open_socket(server, path, person)
        try:
            await asyncio.sleep(PERIOD)  # open, and checked at least once
            await asyncio.to_thread(take_away)
            taken = time.monotonic()
            received, code = await pushes_until_closed(socket)
            return received, code, time.monotonic() - taken
        finally:
            await socket.close()

    return asyncio.run(scenario())


def test_a_batch_socket_closes_when_the_credential_is_dropped_and_pushes_no_more(
    rechecking: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The finding: a dropped credential's socket went on pushing a running batch's task ids.
    Now it is closed within twice the re-check period, while the batch is still sending."""
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=20, label="recheck"
    )
    supervisor, watcher = people["supervisor"], make_person(world, "supervisor")
    batch = select(world, supervisor, incident)
    batches.batch_decide(batch, person=supervisor.user, decision=DECISION)
    batches.batch_submit(batch, person=supervisor.user, typed_count=20)
    batches.batch_store(batch_id=batch.id)

    def drop() -> None:
        credential_drop(user=watcher.user, namespace_id=world["namespace_id"])

    received, code, took = closes_when(rechecking, f"/ws/batches/{batch.id}", watcher, drop)
    assert code == CLOSE_FORBIDDEN
    assert took < 2 * PERIOD + 5  # a bound with room for a loaded machine, not a timing claim
    settled = BatchItem.objects.filter(batch=batch).exclude(outcome="").count()
    assert settled < 20  # it was still sending when the socket was closed
    assert len(received) <= 3 * PERIOD + 2  # at one item a second: only what the bound allows


def test_the_approvals_socket_closes_when_the_supervisor_role_is_taken_away(
    rechecking: DaphneServer, world: dict[str, Any]
) -> None:
    supervisor = make_person(world, "supervisor")

    def demote() -> None:
        person_roles_set(user=supervisor.user, roles=frozenset({"operator"}))

    _, code, _ = closes_when(rechecking, "/ws/approvals", supervisor, demote)
    assert code == CLOSE_FORBIDDEN


def test_the_work_queues_socket_closes_when_the_credential_is_dropped(
    rechecking: DaphneServer, world: dict[str, Any]
) -> None:
    operator = make_person(world, "operator")
    token = rows_token(operator.user.pk, [world["tasks"]["needs_review"]])

    def drop() -> None:
        credential_drop(user=operator.user, namespace_id=world["namespace_id"])

    _, code, _ = closes_when(rechecking, f"/ws/queue?rows={token}", operator, drop)
    assert code == CLOSE_FORBIDDEN


def test_the_decisions_socket_closes_when_the_account_is_deactivated(
    rechecking: DaphneServer, world: dict[str, Any]
) -> None:
    operator = make_person(world, "operator")

    def deactivate() -> None:
        operator.user.is_active = False
        operator.user.save(update_fields=["is_active"])

    _, code, _ = closes_when(rechecking, "/ws/decisions", operator, deactivate)
    assert code == CLOSE_FORBIDDEN
