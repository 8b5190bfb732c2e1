"""The work queue's rows, live (issue 15 §1): ``/ws/queue?rows=<token>`` under
``WebsocketCommunicator``, in this process. A row whose task moves says so; the socket follows
only the rows the page was given, in a token signed for this person, and pushes only while the
person's credential reads the task (console/access.py, asked of the real recovery API of
``orbit_server``). The reviews are made here, so that their on-commit publish reaches the
socket through this process's channel layer."""

import asyncio
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from django.core import signing
from pytest_django.fixtures import Settings as SettingsWrapper

from orbit_console.asgi import application
from orbit_console.console.consumers import rows_token
from orbit_console.ledger.models import Queue
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer
from tests.timeline.helpers import (
    retry_in_process,
    review_in_process,
    session_cookie,
    socket_headers,
)

ORIGIN = "http://127.0.0.1"
RECEIVE_TIMEOUT = 20  # two cores and other suites at once: generous, never a timing assertion


def queue_socket(person: TestPerson, token: str) -> WebsocketCommunicator:
    headers = socket_headers(origin=ORIGIN, session=session_cookie(person.user))
    return WebsocketCommunicator(application, f"/ws/queue?rows={token}", headers=headers)


def quiet_while_reviewed(person: TestPerson, token: str, world: dict[str, Any]) -> bool:
    """Whether the person's socket with ``token`` stays silent while the world's NEEDS_REVIEW
    task is reviewed."""

    async def scenario() -> bool:
        socket = queue_socket(person, token)
        assert (await socket.connect(timeout=RECEIVE_TIMEOUT))[0]
        await sync_to_async(review_in_process)(world)
        quiet = bool(await socket.receive_nothing(timeout=2))
        await socket.disconnect()
        return quiet

    return asyncio.run(scenario())


def pushed_while(person: TestPerson, token: str, change: Callable[[], str]) -> tuple[str, str]:
    """What ``change`` (made in this process) returned, and the first push the person's socket
    with ``token`` received for it."""

    async def scenario() -> tuple[str, str]:
        socket = queue_socket(person, token)
        assert (await socket.connect(timeout=RECEIVE_TIMEOUT))[0]
        made = await sync_to_async(change)()
        pushed = await socket.receive_from(timeout=RECEIVE_TIMEOUT)
        await socket.disconnect()
        return made, str(pushed)

    return asyncio.run(scenario())


def test_a_row_whose_task_is_reviewed_says_so_at_once(
    settings: SettingsWrapper, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    settings.ORBIT_API_URL = orbit_server.url
    operator = make_person(world, "operator")
    shown = world["tasks"]["needs_review"]
    token = rows_token(operator.user.pk, [shown, world["tasks"]["failed"]])

    _, pushed = pushed_while(operator, token, lambda: review_in_process(world))
    assert f'id="row-live-{shown}"' in pushed and 'hx-swap-oob="true"' in pushed
    assert "now FAILED, revision 4" in pushed


def test_a_row_whose_task_is_retried_links_the_new_task(
    settings: SettingsWrapper, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    settings.ORBIT_API_URL = orbit_server.url
    operator = make_person(world, "operator")
    shown = world["tasks"]["failed"]
    token = rows_token(operator.user.pk, [shown])

    successor, pushed = pushed_while(operator, token, lambda: retry_in_process(world))
    assert f'id="row-live-{shown}"' in pushed
    assert f'retried: <a href="/tasks/{successor}">the new task</a>' in pushed


def test_the_socket_follows_the_rows_it_was_given_only(
    settings: SettingsWrapper, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    """A task the page does not show moves: nothing is pushed (its group was never joined)."""
    settings.ORBIT_API_URL = orbit_server.url
    operator = make_person(world, "operator")

    token = rows_token(operator.user.pk, [world["tasks"]["failed"]])
    assert quiet_while_reviewed(operator, token, world)


def test_no_push_reaches_a_person_whose_credential_cannot_read_the_task(
    settings: SettingsWrapper, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    """Rows are only what the API listed to the person, but the socket asks the API before
    every push: a credential limited to another queue hears nothing of this one's task."""
    settings.ORBIT_API_URL = orbit_server.url
    reports = Queue.objects.get(namespace_id=world["namespace_id"], name="reports")
    outsider = make_person(world, "operator", queue_ids=frozenset({reports.id}))
    token = rows_token(outsider.user.pk, [world["tasks"]["needs_review"]])

    assert quiet_while_reviewed(outsider, token, world)


def test_a_token_of_someone_else_or_forged_opens_nothing(
    world: dict[str, Any], live_db: None
) -> None:
    operator, other = make_person(world, "operator"), make_person(world, "operator")
    tasks = [world["tasks"]["needs_review"]]
    forged = signing.dumps([operator.user.pk, tasks], salt="not the rows salt", compress=True)
    tampered = rows_token(operator.user.pk, tasks) + "x"

    async def opens(person: TestPerson, token: str) -> bool:
        socket = queue_socket(person, token)
        connected, _ = await socket.connect(timeout=RECEIVE_TIMEOUT)
        await socket.disconnect()
        return bool(connected)

    async def scenario() -> list[bool]:
        return [
            await opens(operator, rows_token(operator.user.pk, tasks)),
            await opens(other, rows_token(operator.user.pk, tasks)),
            await opens(operator, forged),
            await opens(operator, tampered),
            await opens(operator, ""),
        ]

    assert asyncio.run(scenario()) == [True, False, False, False, False]
