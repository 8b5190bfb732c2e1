"""The supervisors' live approvals queue (``/ws/approvals``) under ``WebsocketCommunicator``, in
this process: a new proposal is pushed only to supervisors whose credential can read its task
(issue 13; console/access.py). The proposal is made here, so that its on-commit publish reaches
the sockets through this process's channel layer; the access checks go over HTTP to the real
recovery API of ``orbit_server``."""

import asyncio
import json
from typing import Any

from asgiref.sync import sync_to_async
from channels.testing import WebsocketCommunicator
from pytest_django.fixtures import Settings as SettingsWrapper

from orbit_console.asgi import application
from orbit_console.decisions import batches
from orbit_console.decisions.proposals import proposal_create
from orbit_console.ledger.models import Queue
from orbit_console.ledger.seed import seed_incident, seed_world
from tests.approvals.conftest import required_policy
from tests.decisions.test_batches import DECISION, select
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer
from tests.timeline.helpers import session_cookie, socket_headers

ORIGIN = "http://127.0.0.1"
RECEIVE_TIMEOUT = 20  # two cores and other suites at once: generous, never a timing assertion


def approvals_socket(person: TestPerson) -> WebsocketCommunicator:
    headers = socket_headers(origin=ORIGIN, session=session_cookie(person.user))
    return WebsocketCommunicator(application, "/ws/approvals", headers=headers)


def test_a_proposal_is_pushed_only_to_supervisors_who_can_read_its_task(
    settings: SettingsWrapper, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    settings.ORBIT_API_URL = orbit_server.url
    reports = Queue.objects.get(namespace_id=world["namespace_id"], name="reports")
    own = make_person(world, "supervisor")
    outsiders = [
        make_person(seed_world(label="approvals-other"), "supervisor"),
        make_person(world, "supervisor", queue_ids=frozenset({reports.id})),
    ]
    operator = make_person(world, "operator")

    def propose() -> str:
        return proposal_create(
            action="review",
            task_id=world["tasks"]["needs_review"],
            queue_id=world["queue_id"],
            namespace_id=world["namespace_id"],
            expected_revision="3",
            body=json.dumps({"reason": "pushed to whom?"}),
            proposed_by=operator.user,
        ).proposal.id

    async def scenario() -> None:
        sockets = [approvals_socket(person) for person in [own, *outsiders]]
        for socket in sockets:
            assert (await socket.connect(timeout=RECEIVE_TIMEOUT))[0]
        proposal_id = await sync_to_async(propose)()
        assert proposal_id in await sockets[0].receive_from(timeout=RECEIVE_TIMEOUT)
        # The push reached the supervisor who may see it: the others had theirs decided by now.
        for socket in sockets[1:]:
            assert await socket.receive_nothing(timeout=1)
        for socket in sockets:
            await socket.disconnect()

    asyncio.run(scenario())


def test_a_proposed_batch_appears_live_and_goes_when_decided_for_supervisors_who_see_it(
    settings: SettingsWrapper, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    """Issue 16: a batch is one proposal in the same live queue. Its row is pushed to the
    supervisors whose credential reads every one of its tasks, and removed when it is
    approved; a supervisor limited to another queue, or of another namespace, hears nothing."""
    settings.ORBIT_API_URL = orbit_server.url
    settings.CONSOLE_APPROVAL_POLICY = required_policy()
    reports = Queue.objects.get(namespace_id=world["namespace_id"], name="reports")
    own = make_person(world, "supervisor")
    outsiders = [
        make_person(seed_world(label="batch-approvals-other"), "supervisor"),
        make_person(world, "supervisor", queue_ids=frozenset({reports.id})),
    ]
    operator = make_person(world, "operator")
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=3, label="live-b"
    )

    def propose() -> str:
        batch = select(world, operator, incident)
        batches.batch_decide(batch, person=operator.user, decision=DECISION)
        return batches.batch_submit(batch, person=operator.user, typed_count=3).id

    async def scenario() -> None:
        sockets = [approvals_socket(person) for person in [own, *outsiders]]
        for socket in sockets:
            assert (await socket.connect(timeout=RECEIVE_TIMEOUT))[0]
        batch_id = await sync_to_async(propose)()
        row = await sockets[0].receive_from(timeout=RECEIVE_TIMEOUT)
        assert f'id="batch-{batch_id}"' in row and "afterbegin:#proposal-rows" in row
        assert "3 tasks, each at its revision" in row and "broker outage INC-7" in row
        for socket in sockets[1:]:
            assert await socket.receive_nothing(timeout=1)

        await sync_to_async(batches.batch_approve)(batch_id=batch_id, approver=own.user)
        gone = await sockets[0].receive_from(timeout=RECEIVE_TIMEOUT)
        assert f'id="batch-{batch_id}"' in gone and 'hx-swap-oob="delete"' in gone
        for socket in sockets:
            await socket.disconnect()

    asyncio.run(scenario())


def test_a_batchs_first_of_two_approvals_is_pushed_with_its_count(
    settings: SettingsWrapper, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    """Issue 29: as for a proposal, a batch's partial approval is announced live: its row comes
    again, counting "1 of 2 approvals" (a newer data-live-version, which the page puts in
    place of the row it shows), and the batch's own socket shows the count too."""
    settings.ORBIT_API_URL = orbit_server.url
    settings.CONSOLE_APPROVAL_POLICY = required_policy(approvers=2)
    first, second = make_person(world, "supervisor"), make_person(world, "supervisor")
    operator = make_person(world, "operator")
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2, label="live-2"
    )

    def propose() -> str:
        batch = select(world, operator, incident)
        batches.batch_decide(batch, person=operator.user, decision=DECISION)
        return batches.batch_submit(batch, person=operator.user, typed_count=2).id

    async def scenario() -> None:
        batch_id = await sync_to_async(propose)()
        queue = approvals_socket(second)
        assert (await queue.connect(timeout=RECEIVE_TIMEOUT))[0]
        page = WebsocketCommunicator(
            application,
            f"/ws/batches/{batch_id}",
            headers=socket_headers(origin=ORIGIN, session=session_cookie(operator.user)),
        )
        assert (await page.connect(timeout=RECEIVE_TIMEOUT))[0]
        shown = await page.receive_from(timeout=RECEIVE_TIMEOUT)
        assert "0 of 2 approvals" in shown

        await sync_to_async(batches.batch_approve)(batch_id=batch_id, approver=first.user)
        row = await queue.receive_from(timeout=RECEIVE_TIMEOUT)
        assert f'id="batch-{batch_id}"' in row and 'data-live-version="1"' in row
        assert "1 of 2 approvals" in row
        pushed = await page.receive_from(timeout=RECEIVE_TIMEOUT)
        assert "1 of 2 approvals" in pushed and first.username in pushed
        for socket in (queue, page):
            await socket.disconnect()

    asyncio.run(scenario())
