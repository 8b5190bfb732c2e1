""" "My decisions" adds and drops rows live (issue 30), over real WebSockets: the proposer's
``/ws/decisions`` is told of a proposal they made elsewhere (a row under "Waiting for
approval"), and when a supervisor approves it, that row goes and the decision it became comes —
rows the page did not have before. Before, the socket only pushed rows of decisions whose
follow-up moved, which the page could only update in place."""

import asyncio
import contextlib
import re
from typing import Any

from websockets.asyncio.client import ClientConnection, connect
from websockets.typing import Origin

from orbit_console.decisions.models import Submission
from tests.approvals.conftest import decide, propose_review
from tests.approvals.test_proposals import batch_step, propose_batch
from tests.console.web import signed_in
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer
from tests.timeline.helpers import session_cookie

WAIT = 20.0


async def heard_until(socket: ClientConnection, *patterns: str) -> list[str]:
    """What the socket pushes, until a push matching each of ``patterns`` has been heard."""
    heard: list[str] = []
    while not all(any(re.search(p, text) for text in heard) for p in patterns):
        heard.append(str(await asyncio.wait_for(socket.recv(), WAIT)))
    return heard


def test_my_decisions_hears_a_new_proposal_and_the_decision_it_became(
    approvals_server: DaphneServer, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    server = approvals_server
    operator, supervisor = crew["operator"], crew["supervisor"]
    url = server.url.replace("http://", "ws://", 1) + "/ws/decisions"

    async def scenario() -> tuple[str, list[str], list[str], list[str]]:
        async def listen(user: Any) -> ClientConnection:
            cookie = f"sessionid={await asyncio.to_thread(session_cookie, user)}"
            return await connect(
                url, origin=Origin(server.url), additional_headers={"Cookie": cookie}
            )

        mine, others = await listen(operator.user), await listen(crew["operator_2"].user)
        try:
            with signed_in(server.url, operator) as console:
                proposal_id, _ = await asyncio.to_thread(
                    propose_review, console, world["tasks"]["needs_review"]
                )
            proposed = await heard_until(mine, f'id="waiting-proposal-{proposal_id}"')
            with signed_in(server.url, supervisor) as console:
                answer = await asyncio.to_thread(decide, console, proposal_id, "approve")
                assert answer.status_code == 303, answer.text
            decided = await heard_until(
                mine,
                r'id="decision-[0-9a-f]{32}"',
                f'id="waiting-proposal-{proposal_id}"[^>]*data-live-gone',
            )
            heard: list[str] = []
            with contextlib.suppress(TimeoutError):
                heard.append(str(await asyncio.wait_for(others.recv(), 1.0)))
            return proposal_id, proposed, decided, heard
        finally:
            await mine.close()
            await others.close()

    proposal_id, proposed, decided, heard = asyncio.run(scenario())
    row = next(text for text in proposed if f"waiting-proposal-{proposal_id}" in text)
    assert 'data-live-list="waiting-rows"' in row and "data-live-gone" not in row
    assert "pending approval" in row
    submission = Submission.objects.get(proposal_id=proposal_id)
    pushed = next(text for text in decided if f'id="decision-{submission.id}"' in text)
    assert 'data-live-list="decision-rows"' in pushed
    assert f"approved by {supervisor.username}" in pushed
    assert heard == []  # another operator hears nothing of it


def test_my_decisions_lists_a_proposed_batch_and_drops_it_live_once_rejected(
    approvals_server: DaphneServer, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    """A batch waiting for approval is listed on its author's "My decisions" (it was left out);
    rejected by a supervisor, its row is dropped live."""
    server = approvals_server
    operator = crew["operator"]
    tasks = [world["tasks"]["needs_review"], world["tasks"]["needs_review_2"]]
    url = server.url.replace("http://", "ws://", 1) + "/ws/decisions"
    with signed_in(server.url, operator) as console:
        batch_id = propose_batch(console, tasks)
        page = console.get("/decisions").text
    listed = re.search(rf'<li id="waiting-batch-{batch_id}".*?</li>', page, re.DOTALL)
    assert listed is not None, "the proposed batch is not listed"
    assert "pending approval" in listed.group(0) and "2 tasks" in listed.group(0)

    async def scenario() -> list[str]:
        cookie = f"sessionid={await asyncio.to_thread(session_cookie, operator.user)}"
        socket = await connect(
            url, origin=Origin(server.url), additional_headers={"Cookie": cookie}
        )
        try:
            with signed_in(server.url, crew["supervisor"]) as console:
                await asyncio.to_thread(
                    batch_step, console, batch_id, "reject", reason="Not this way"
                )
            return await heard_until(socket, f'id="waiting-batch-{batch_id}"[^>]*data-live-gone')
        finally:
            await socket.close()

    assert asyncio.run(scenario())
    with signed_in(server.url, operator) as console:
        assert f"waiting-batch-{batch_id}" not in console.get("/decisions").text
