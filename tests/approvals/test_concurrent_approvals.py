"""Two supervisors approving one proposal at the same moment (issue 5, C9, I1): one submission,
one platform audit record, and the second supervisor is told it was already decided, and by
whom.

Each supervisor posts from a thread of their own, released together by a barrier, to a server
process of their own (two daphne processes with approval required, on the same database), so
the two approvals really run at once.
"""

import json
import threading
from typing import Any

import httpx
import pytest

from orbit_console.decisions.models import Approval, Proposal, Submission
from orbit_console.decisions.proposals import proposal_create
from orbit_console.people.models import OrbitCredential
from tests.approvals.conftest import messages_of, task_records
from tests.console.web import Console, park_task, signed_in
from tests.support.orbit import review_body
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

ROUNDS = 3


def race_approvals(consoles: list[Console], proposal_id: str) -> list[httpx.Response]:
    """Every console posts its approval of ``proposal_id`` at the same moment."""
    tokens = [console.csrf_token() for console in consoles]
    barrier = threading.Barrier(len(consoles))
    answers: list[httpx.Response | BaseException | None] = [None] * len(consoles)

    def approve(index: int) -> None:
        data = [("csrfmiddlewaretoken", tokens[index]), ("note", f"approver {index}")]
        barrier.wait(timeout=60)
        try:
            answers[index] = consoles[index].post(f"/proposals/{proposal_id}/approve", data)
        except BaseException as error:  # reported below, in the test's thread
            answers[index] = error

    threads = [threading.Thread(target=approve, args=(i,)) for i in range(len(consoles))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=180)
    responses = []
    for answer in answers:
        assert isinstance(answer, httpx.Response), f"an approval failed: {answer!r}"
        responses.append(answer)
    return responses


@pytest.mark.parametrize("round_number", range(1, ROUNDS + 1))
def test_two_supervisors_approving_at_once_send_one_submission(
    round_number: int,
    approvals_server: DaphneServer,
    approvals_server_2: DaphneServer,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
    approvals_api: httpx.Client,
) -> None:
    task_id = park_task(world["queue_id"])
    proposal = proposal_create(
        action="review",
        task_id=task_id,
        expected_revision="3",
        body=json.dumps(review_body()),
        proposed_by=crew["operator"].user,
    ).proposal
    supervisors = [crew["supervisor"], crew["supervisor_2"]]
    servers = [approvals_server, approvals_server_2]
    if round_number % 2 == 0:  # each supervisor on either server, round by round
        servers.reverse()
    consoles = [
        signed_in(server.url, person) for server, person in zip(servers, supervisors, strict=True)
    ]
    try:
        answers = race_approvals(consoles, proposal.id)

        assert [answer.status_code for answer in answers] == [303, 303]
        sent = [
            i
            for i, answer in enumerate(answers)
            if answer.headers["location"] != (f"/proposals/{proposal.id}")
        ]
        assert len(sent) == 1, [answer.headers["location"] for answer in answers]
        winner, loser = sent[0], 1 - sent[0]
        assert answers[winner].headers["location"].startswith("/submissions/")

        # One submission, one approval, one platform audit record, naming the winner (AU6).
        [submission] = Submission.objects.filter(task_id=task_id)
        assert submission.proposal_id == proposal.id
        assert submission.sent_as_id == supervisors[winner].user.pk
        assert submission.state == "succeeded"
        [approval] = Approval.objects.filter(proposal_id=proposal.id)
        assert approval.approver_id == supervisors[winner].user.pk
        decided = Proposal.objects.get(id=proposal.id)
        assert (decided.state, decided.decided_by_id) == ("approved", supervisors[winner].user.pk)
        [record] = task_records(approvals_api, world, task_id)
        assert record["id"] == submission.audit_id
        winner_actor = OrbitCredential.objects.get(user=supervisors[winner].user).actor_id
        assert record["actor_id"] == winner_actor

        # The second supervisor is told that it was decided already, and by whom.
        page = consoles[loser].get(answers[loser].headers["location"])
        told = messages_of(page.text)
        assert "already decided" in told, told
        assert supervisors[winner].username in told
    finally:
        for console in consoles:
            console.close()
