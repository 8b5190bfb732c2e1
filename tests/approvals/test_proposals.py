"""Four eyes over real HTTP (issue 5): an operator's decision becomes a proposal, a different
supervisor approves it and the stored request goes out with the supervisor's own credential
(AU6), through the durable-submission path (C9, I1). Self-approval, people without the supervisor
role, reject, withdraw, expiry, stale proposals, thresholds and the policy switch.

The servers run with approval required (``tests/approvals/conftest.py``); the one test of the
policy switched off uses ``orbit_server``, whose policy is off.
"""

import html
import json
import re
from datetime import timedelta
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.utils import timezone

from orbit_console.decisions.batchworker import work_batches
from orbit_console.decisions.models import (
    Approval,
    Batch,
    BatchState,
    ConsoleEvent,
    Proposal,
    Submission,
)
from orbit_console.decisions.proposals import (
    ProposalRefused,
    proposal_approve,
    proposal_create,
)
from orbit_console.ledger.seed import seed_incident
from orbit_console.lib import strictjson
from orbit_console.people.models import OrbitCredential
from tests.approvals.conftest import (
    APPROVALS_ON,
    assert_nothing_sent,
    decide,
    history_of,
    messages_of,
    proposal_id_of,
    propose_review,
    task_records,
)
from tests.console.web import (
    REVIEW_CHECKS,
    Console,
    element,
    form_with,
    pre_text,
    retry_values,
    review_through_console,
    review_values,
    signed_in,
    step_of,
    text_of,
    wizard_post,
    wizard_submit,
    wizard_to_confirm,
)
from tests.support.orbit import get_task, retry, review, review_body
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer, child_env, run_manage

FROZEN_FIELDS = ("action", "task_id", "expected_revision", "idempotency_key", "body", "created_at")


def frozen(proposal_id: str) -> tuple[Any, ...]:
    """The fields of a proposal that are fixed the moment it is made."""
    proposal = Proposal.objects.get(id=proposal_id)
    return (*(getattr(proposal, name) for name in FROZEN_FIELDS), proposal.proposed_by_id)


def kinds(proposal_id: str) -> list[tuple[str, str]]:
    """The proposal's console events, oldest first: (kind, actor's user name or "")."""
    events = ConsoleEvent.objects.filter(proposal_id=proposal_id).select_related("actor")
    return [
        (event.kind, event.actor.get_username() if event.actor else "")
        for event in events.order_by("created_at", "id")
    ]


def actor_id_of(person: TestPerson) -> str:
    return OrbitCredential.objects.get(user=person.user).actor_id


def task_state(api: httpx.Client, world: dict[str, Any], task_id: str) -> tuple[str, str]:
    response = get_task(api, task_id, world["tokens"]["admin"])
    assert response.status_code == 200, response.text
    data = response.json()["data"]
    return data["state"], data["revision"]


@pytest.fixture
def consoles(approvals_server: DaphneServer, crew: dict[str, TestPerson]) -> Any:
    """Everyone of ``crew`` signed in to the approvals server, each in a session of their own."""
    sessions = {role: signed_in(approvals_server.url, person) for role, person in crew.items()}
    yield sessions
    for console in sessions.values():
        console.close()


# --- Proposing ----------------------------------------------------------------------------------


def test_an_operators_completed_wizard_becomes_a_proposal_not_a_submission(
    consoles: dict[str, Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
    approvals_api: httpx.Client,
) -> None:
    operator = consoles["operator"]
    task_id = world["tasks"]["needs_review"]

    task_page = operator.get(f"/tasks/{task_id}")
    assert task_page.status_code == 200
    page_text = text_of(task_page.text)
    assert "Propose a review" in page_text
    assert "Review this task" not in page_text
    assert "A supervisor other than you approves it before it is sent." in page_text

    confirm = wizard_to_confirm(operator, task_id, "review", review_values())
    assert "once a supervisor other than you approves it" in text_of(confirm.text)
    assert "Propose the review" in text_of(confirm.text)
    shown = pre_text(confirm.text, r'<pre id="request-body">.*?</pre>')
    proposal_id = proposal_id_of(wizard_submit(operator, task_id, "review", confirm.text))

    # The proposal holds the request exactly as it would have been sent (C9).
    proposal = Proposal.objects.get(id=proposal_id)
    assert (proposal.action, proposal.task_id, proposal.expected_revision) == (
        "review",
        task_id,
        "3",
    )
    assert proposal.body == shown
    body = json.loads(proposal.body)
    assert body["expected_revision"] == "3"
    assert body["execution_settled"] is True
    assert proposal.idempotency_key
    assert (proposal.state, proposal.proposed_by_id, proposal.required_approvals) == (
        "pending",
        crew["operator"].user.pk,
        1,
    )
    assert kinds(proposal_id) == [("proposal.proposed", crew["operator"].username)]

    # Nothing was sent: no submission, no platform audit record, the task has not moved.
    assert_nothing_sent(approvals_api, world, task_id)
    assert task_state(approvals_api, world, task_id) == ("NEEDS_REVIEW", "3")

    page = operator.get(f"/proposals/{proposal_id}")
    assert page.status_code == 200
    text = text_of(page.text)
    assert "Your proposal waits for a supervisor's approval." in messages_of(page.text)
    assert "Waiting for approval" in text
    assert proposal.idempotency_key in text
    assert "Withdraw my proposal" in text
    assert "Approve and send" not in text  # nobody approves their own proposal

    # The proposal is in the task's timeline.
    assert "Proposed for approval" in text_of(operator.get(f"/tasks/{task_id}").text)


def test_the_approvals_queue_lists_pending_proposals_for_supervisors_only(
    consoles: dict[str, Console], world: dict[str, Any]
) -> None:
    proposal_id, _ = propose_review(consoles["operator"], world["tasks"]["needs_review"])

    queue = consoles["supervisor"].get("/approvals")
    assert queue.status_code == 200
    assert f'id="proposal-{proposal_id}"' in element(
        queue.text, r'<tbody id="proposal-rows">.*?</tbody>'
    )
    for role in ("operator", "auditor"):
        assert consoles[role].get("/approvals").status_code == 403


def test_the_approvals_queue_shows_what_is_decided_on_and_marks_a_supervisors_own(
    consoles: dict[str, Console], world: dict[str, Any]
) -> None:
    """Issue 15: the queue showed no outcome, handler or reason. Each row now shows what the
    supervisor decides on, and a supervisor's own proposal says that another must approve it."""
    reason = "The <b>bucket</b> audit shows no write"
    operators, _ = propose_review(
        consoles["operator"], world["tasks"]["needs_review"], outcome="SUCCEEDED", reason=reason
    )
    own, _ = propose_review(consoles["supervisor"], world["tasks"]["needs_review_2"])

    rows = element(
        consoles["supervisor"].get("/approvals").text, r'<tbody id="proposal-rows">.*?</tbody>'
    )
    operators_row = element(rows, rf'<tr id="proposal-{operators}".*?</tr>')
    assert "SUCCEEDED" in text_of(operators_row)
    assert "object.prepare" in text_of(operators_row)
    assert reason in text_of(operators_row) and "<b>bucket</b>" not in operators_row  # escaped
    assert "yours" not in text_of(operators_row)
    own_row = element(rows, rf'<tr id="proposal-{own}".*?</tr>')
    assert "yours: another supervisor approves it" in text_of(own_row)
    # Another supervisor sees it as anyone's.
    others = consoles["supervisor_2"].get("/approvals").text
    assert "yours" not in text_of(element(others, rf'<tr id="proposal-{own}".*?</tr>'))


def test_proposing_the_same_task_revision_twice_yields_one_proposal(
    consoles: dict[str, Console], world: dict[str, Any]
) -> None:
    """Two tabs, or two operators, deciding on one task revision: one proposal."""
    task_id = world["tasks"]["needs_review"]
    operator = consoles["operator"]
    first_tab = wizard_to_confirm(operator, task_id, "review", review_values())
    second_tab = wizard_to_confirm(operator, task_id, "review", review_values(outcome="SUCCEEDED"))
    other_operator = wizard_to_confirm(consoles["operator_2"], task_id, "review", review_values())

    first = wizard_submit(operator, task_id, "review", first_tab.text)
    second = wizard_submit(operator, task_id, "review", second_tab.text)
    third = wizard_submit(consoles["operator_2"], task_id, "review", other_operator.text)

    assert first.status_code == second.status_code == third.status_code == 303
    assert first.headers["location"] == second.headers["location"] == third.headers["location"]
    [proposal] = Proposal.objects.filter(task_id=task_id)
    assert json.loads(proposal.body)["outcome"] == "FAILED"  # the first one stands
    # The same decision again: a note. A different one: set aside in plain words, beside the
    # one that stands (issue 15).
    page = consoles["operator_2"].get(third.headers["location"])
    assert "had already been proposed" in messages_of(page.text)
    assert 'id="set-aside"' not in page.text
    page = operator.get(second.headers["location"])
    assert "Your decision was not sent" in text_of(page.text)
    mine = json.loads(pre_text(page.text, r'<pre id="set-aside-mine">.*?</pre>'))
    assert mine["outcome"] == "SUCCEEDED"

    # Once the one that stood is rejected, a new decision starts from what they typed: the
    # checks are made again, the decide step holds their outcome, result, reason and evidence.
    assert 'data-copy="set-aside-mine"' in page.text
    restart = re.search(r'href="([^"]+)" id="set-aside-restart"', page.text)
    assert restart is not None
    assert restart[1] == f"/tasks/{task_id}/review?from={proposal.id}"
    answer = decide(consoles["supervisor"], proposal.id, "reject", reason="Wrong outcome")
    assert answer.status_code == 303
    start = operator.get(html.unescape(restart[1]))
    assert start.status_code == 200
    assert "starts from yours that was not sent" in messages_of(start.text)
    decide_step = wizard_post(operator, f"/tasks/{task_id}/review", start.text, REVIEW_CHECKS)
    assert step_of(decide_step.text) == "decide"
    form = form_with(decide_step.text, "pin")
    assert form.value("outcome") == "SUCCEEDED"
    assert strictjson.loads(form.value("result") or "") == strictjson.loads(
        review_values()[1][1]
    )  # 9007199254740993 kept exactly
    assert (form.value("reason"), form.value("evidence_ref")) == (
        mine["reason"],
        mine["evidence_ref"],
    )
    # Someone else's session holds nothing of theirs: the wizard starts empty.
    other = consoles["operator_2"].get(html.unescape(restart[1]))
    assert "starts from yours" not in messages_of(other.text)


# --- Approving ----------------------------------------------------------------------------------


def test_approval_sends_the_stored_request_with_the_supervisors_credential_AU6_C9(
    consoles: dict[str, Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
    approvals_api: httpx.Client,
) -> None:
    task_id = world["tasks"]["needs_review"]
    proposal_id, shown = propose_review(consoles["operator"], task_id)
    before = frozen(proposal_id)
    supervisor = consoles["supervisor"]

    page = supervisor.get(f"/proposals/{proposal_id}")
    assert page.status_code == 200
    assert "Approve and send" in text_of(page.text)
    assert pre_text(page.text, r'<pre id="proposal-body">.*?</pre>') == shown
    assert 'id="proposal-drift"' not in page.text

    answer = decide(supervisor, proposal_id, "approve", note="Evidence checked with ops")
    assert answer.status_code == 303
    assert answer.headers["location"].startswith("/submissions/")
    receipt = supervisor.get(answer.headers["location"])
    assert receipt.status_code == 200

    [submission] = Submission.objects.filter(task_id=task_id)
    proposal = Proposal.objects.get(id=proposal_id)
    audit_id = text_of(element(receipt.text, r'<dd class="mono" id="receipt-audit-id">.*?</dd>'))
    assert audit_id and audit_id == submission.audit_id
    assert "Applied" in text_of(receipt.text)
    assert crew["supervisor"].username in text_of(receipt.text)

    # Exactly what was proposed went out, under the key stored with the proposal.
    assert frozen(proposal_id) == before
    assert (submission.body, submission.idempotency_key, submission.expected_revision) == (
        proposal.body,
        proposal.idempotency_key,
        proposal.expected_revision,
    )
    assert submission.proposal_id == proposal_id
    assert (submission.created_by_id, submission.sent_as_id) == (
        crew["operator"].user.pk,
        crew["supervisor"].user.pk,
    )
    assert submission.state == "succeeded"
    assert (proposal.state, proposal.decided_by_id, proposal.decision_note) == (
        "approved",
        crew["supervisor"].user.pk,
        "Evidence checked with ops",
    )

    # The platform's audit names the approving supervisor, not the proposer (AU6).
    [record] = task_records(approvals_api, world, task_id)
    assert record["id"] == audit_id
    assert record["actor_id"] == actor_id_of(crew["supervisor"])
    assert record["actor_id"] != actor_id_of(crew["operator"])
    assert task_state(approvals_api, world, task_id) == ("FAILED", "4")

    # Issue 15: the proposal's page does not warn that the task moved: it moved because of it.
    for person in ("operator", "supervisor"):
        page = consoles[person].get(f"/proposals/{proposal_id}")
        assert 'id="proposal-drift"' not in page.text
        assert "has moved" not in text_of(page.text)

    # ... but it does warn of what others do to the task afterwards.
    again = retry(approvals_api, world, task="needs_review", revision="4")
    assert again.status_code == 201, again.text
    successor = again.json()["data"]["task"]["id"]
    page = consoles["operator"].get(f"/proposals/{proposal_id}")
    drift = text_of(
        element(
            page.text, r'<div class="callout danger" role="alert" id="proposal-drift">.*?</div>'
        )
    )
    assert "The task has moved since this decision was applied." in drift
    assert f"Someone has retried the task since: its successor is {successor}." in drift
    assert "revision" not in drift  # a retry leaves the source's revision as it was (RT9)

    # Every step is a console event naming its actor; the proposal's history names both people.
    operator_name, supervisor_name = crew["operator"].username, crew["supervisor"].username
    assert kinds(proposal_id) == [
        ("proposal.proposed", operator_name),
        ("proposal.approved", supervisor_name),
        ("submission.stored", operator_name),
        ("submission.sent", supervisor_name),
        ("submission.receipt", supervisor_name),
    ]
    page = consoles["operator"].get(f"/proposals/{proposal_id}")
    history = history_of(page.text)
    assert operator_name in history and supervisor_name in history
    for label in ("Proposed for approval", "Approved", "Sent to the recovery API", "Receipt"):
        assert label in history
    assert "Evidence checked with ops" in history
    assert "Approved and sent" in text_of(page.text)
    assert "Withdraw my proposal" not in text_of(page.text)

    # Decided proposals leave the supervisors' queue.
    queue = consoles["supervisor_2"].get("/approvals")
    assert f'id="proposal-{proposal_id}"' not in element(
        queue.text, r'<tbody id="proposal-rows">.*?</tbody>'
    )


def test_the_approval_note_is_stored_in_one_language_and_shown_in_the_readers(
    approvals_server: DaphneServer,
    consoles: dict[str, Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    """Issue 15: a supervisor reading Chinese stored "由 … 批准" where one reading English
    stored "approved by …", so one list mixed both. The note is stored in English and each
    reader sees it in their language."""
    task_id = world["tasks"]["needs_review"]
    proposal_id, _ = propose_review(consoles["operator"], task_id)
    with Console(approvals_server.url, headers={"Accept-Language": "zh-Hans"}) as chinese:
        chinese.sign_in(crew["supervisor"])
        answer = decide(chinese, proposal_id, "approve")
        assert answer.status_code == 303
        stored = ConsoleEvent.objects.get(kind="submission.stored", proposal_id=proposal_id)
        name = crew["supervisor"].username
        assert stored.note == f"approved by {name}"
        assert f"由 {name} 批准" in text_of(chinese.get(answer.headers["location"]).text)
    english = consoles["operator"].get(answer.headers["location"])
    assert f"approved by {name}" in text_of(english.text)


def test_an_operator_cannot_approve_their_own_proposal_by_a_crafted_post(
    consoles: dict[str, Console], world: dict[str, Any], approvals_api: httpx.Client
) -> None:
    task_id = world["tasks"]["needs_review"]
    proposal_id, _ = propose_review(consoles["operator"], task_id)

    assert decide(consoles["operator"], proposal_id, "approve").status_code == 403
    assert Proposal.objects.get(id=proposal_id).state == "pending"
    assert not Approval.objects.filter(proposal_id=proposal_id).exists()
    assert_nothing_sent(approvals_api, world, task_id)


def test_a_supervisors_own_proposal_needs_another_supervisor(
    consoles: dict[str, Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
    approvals_api: httpx.Client,
) -> None:
    task_id = world["tasks"]["needs_review"]
    supervisor = consoles["supervisor"]
    assert "Propose a review" in text_of(supervisor.get(f"/tasks/{task_id}").text)
    proposal_id, _ = propose_review(supervisor, task_id)

    page = supervisor.get(f"/proposals/{proposal_id}")
    assert "Approve and send" not in text_of(page.text)  # not offered...
    answer = decide(supervisor, proposal_id, "approve")  # ...and refused when crafted
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/proposals/{proposal_id}"
    refused = supervisor.get(answer.headers["location"])
    assert "Nobody approves their own proposal." in messages_of(refused.text)
    assert Proposal.objects.get(id=proposal_id).state == "pending"
    assert not Approval.objects.filter(proposal_id=proposal_id).exists()
    assert_nothing_sent(approvals_api, world, task_id)

    # The service refuses it too, whatever view calls it.
    with pytest.raises(ProposalRefused):
        proposal_approve(proposal_id=proposal_id, approver=crew["supervisor"].user)

    answer = decide(consoles["supervisor_2"], proposal_id, "approve")
    assert answer.headers["location"].startswith("/submissions/")
    [record] = task_records(approvals_api, world, task_id)
    assert record["actor_id"] == actor_id_of(crew["supervisor_2"])


@pytest.mark.parametrize("role", ["operator_2", "auditor"])
def test_a_person_without_the_supervisor_role_cannot_approve_or_reject(
    role: str,
    consoles: dict[str, Console],
    world: dict[str, Any],
    approvals_api: httpx.Client,
) -> None:
    task_id = world["tasks"]["needs_review"]
    proposal_id, _ = propose_review(consoles["operator"], task_id)
    other = consoles[role]

    page = other.get(f"/proposals/{proposal_id}")
    assert page.status_code == 200
    assert f"/proposals/{proposal_id}/approve" not in page.text  # not offered...
    assert f"/proposals/{proposal_id}/reject" not in page.text
    assert decide(other, proposal_id, "approve").status_code == 403
    assert decide(other, proposal_id, "reject", reason="I do not like it").status_code == 403

    proposal = Proposal.objects.get(id=proposal_id)
    assert (proposal.state, proposal.decided_by_id) == ("pending", None)
    assert not Approval.objects.filter(proposal_id=proposal_id).exists()
    assert task_records(approvals_api, world, task_id) == []


# --- Reject, withdraw, expire --------------------------------------------------------------------


def test_reject_requires_a_reason_and_records_it(
    consoles: dict[str, Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
    approvals_api: httpx.Client,
) -> None:
    task_id = world["tasks"]["needs_review"]
    proposal_id, _ = propose_review(consoles["operator"], task_id)
    supervisor = consoles["supervisor"]

    for blank in ("", "   "):
        answer = decide(supervisor, proposal_id, "reject", reason=blank)
        assert answer.status_code == 303
        page = supervisor.get(answer.headers["location"])
        # At the field, not in a banner (issue 30), with what was typed kept.
        error = element(
            page.text, r'<div class="errorlist" role="alert" id="reject-reason-error">.*?</div>'
        )
        assert "Say why the proposal is rejected" in text_of(error)
        assert messages_of(page.text) == ""
        assert Proposal.objects.get(id=proposal_id).state == "pending"
    assert kinds(proposal_id) == [("proposal.proposed", crew["operator"].username)]

    reason = "The evidence reference points at the wrong bucket"
    answer = decide(supervisor, proposal_id, "reject", reason=reason)
    assert answer.status_code == 303
    proposal = Proposal.objects.get(id=proposal_id)
    assert (proposal.state, proposal.decided_by_id, proposal.decision_note) == (
        "rejected",
        crew["supervisor"].user.pk,
        reason,
    )
    assert kinds(proposal_id)[-1] == ("proposal.rejected", crew["supervisor"].username)
    assert (
        ConsoleEvent.objects.get(proposal_id=proposal_id, kind="proposal.rejected").note == reason
    )

    page = consoles["operator"].get(f"/proposals/{proposal_id}")
    text = text_of(page.text)
    assert "Rejected by a supervisor" in text
    assert reason in history_of(page.text)
    assert "Withdraw my proposal" not in text
    assert_nothing_sent(approvals_api, world, task_id)

    # The proposer's own box on the work queue says it was rejected, by whom and why (issue 15),
    # instead of the proposal silently leaving it.
    own = text_of(
        element(
            consoles["operator"].get("/").text,
            r'<div class="callout info" id="own-proposals">.*?</div>',
        )
    )
    assert "Rejected by a supervisor" in own
    assert f"({crew['supervisor'].username}: {reason})" in own
    assert "waiting for approval" not in own

    # Decided is decided: a later approval is refused and says by whom.
    answer = decide(consoles["supervisor_2"], proposal_id, "approve")
    refused = messages_of(consoles["supervisor_2"].get(answer.headers["location"]).text)
    assert "already decided" in refused and crew["supervisor"].username in refused
    assert Proposal.objects.get(id=proposal_id).state == "rejected"

    # The task revision is free again: a new proposal can be made.
    new_id, _ = propose_review(consoles["operator"], task_id)
    assert new_id != proposal_id


def test_only_the_proposer_can_withdraw_before_it_is_decided(
    consoles: dict[str, Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
    approvals_api: httpx.Client,
) -> None:
    task_id = world["tasks"]["needs_review"]
    proposal_id, _ = propose_review(consoles["operator"], task_id)

    for role in ("operator_2", "supervisor"):
        other = consoles[role]
        assert "Withdraw my proposal" not in text_of(other.get(f"/proposals/{proposal_id}").text)
        answer = decide(other, proposal_id, "withdraw")
        assert answer.status_code == 303
        assert "Only the person who proposed it" in messages_of(
            other.get(answer.headers["location"]).text
        )
        assert Proposal.objects.get(id=proposal_id).state == "pending"
    assert decide(consoles["auditor"], proposal_id, "withdraw").status_code == 403

    answer = decide(consoles["operator"], proposal_id, "withdraw")
    assert answer.status_code == 303
    proposal = Proposal.objects.get(id=proposal_id)
    assert (proposal.state, proposal.decided_by_id) == ("withdrawn", crew["operator"].user.pk)
    assert kinds(proposal_id)[-1] == ("proposal.withdrawn", crew["operator"].username)
    assert "Withdrawn by the proposer" in text_of(
        consoles["operator"].get(f"/proposals/{proposal_id}").text
    )

    answer = decide(consoles["supervisor"], proposal_id, "approve")
    assert "already decided" in messages_of(
        consoles["supervisor"].get(answer.headers["location"]).text
    )
    assert Proposal.objects.get(id=proposal_id).state == "withdrawn"
    assert_nothing_sent(approvals_api, world, task_id)


def run_reconciler(server: DaphneServer) -> None:
    """One pass of ``manage.py reconcile`` in its own process, on the test database."""
    env = child_env(ORBIT_EMBEDDED_API_URL=server.url, **APPROVALS_ON)
    done = run_manage("reconcile", "--once", env=env, timeout=120)
    assert done.returncode == 0, done.stderr


def test_an_unapproved_proposal_expires_and_cannot_be_approved_afterwards(
    approvals_server: DaphneServer,
    consoles: dict[str, Console],
    world: dict[str, Any],
    approvals_api: httpx.Client,
) -> None:
    task_id = world["tasks"]["needs_review"]
    proposal_id, _ = propose_review(consoles["operator"], task_id)
    proposal = Proposal.objects.get(id=proposal_id)
    assert proposal.expires_at - proposal.created_at == timedelta(hours=24)  # the default
    Proposal.objects.filter(id=proposal_id).update(expires_at=timezone.now() - timedelta(minutes=1))

    run_reconciler(approvals_server)

    proposal = Proposal.objects.get(id=proposal_id)
    assert (proposal.state, proposal.decided_by_id, proposal.decision_slot) == (
        "expired",
        None,
        None,
    )
    assert kinds(proposal_id)[-1] == ("proposal.expired", "")
    page = consoles["supervisor"].get(f"/proposals/{proposal_id}")
    assert "Expired without being sent" in text_of(page.text)
    assert "Approve and send" not in text_of(page.text)

    answer = decide(consoles["supervisor"], proposal_id, "approve")
    assert answer.status_code == 303
    told = messages_of(consoles["supervisor"].get(answer.headers["location"]).text)
    assert told == "This proposal was already decided: Expired without being sent."
    assert Proposal.objects.get(id=proposal_id).state == "expired"
    assert not Approval.objects.filter(proposal_id=proposal_id).exists()
    assert_nothing_sent(approvals_api, world, task_id)


def test_an_overdue_proposal_is_expired_by_an_approval_attempt_before_the_reconciler_runs(
    consoles: dict[str, Console], world: dict[str, Any], approvals_api: httpx.Client
) -> None:
    task_id = world["tasks"]["needs_review"]
    proposal_id, _ = propose_review(consoles["operator"], task_id)
    Proposal.objects.filter(id=proposal_id).update(expires_at=timezone.now() - timedelta(minutes=1))

    answer = decide(consoles["supervisor"], proposal_id, "approve")
    assert answer.status_code == 303
    told = messages_of(consoles["supervisor"].get(answer.headers["location"]).text)
    assert told == "This proposal was already decided: Expired without being sent."
    assert Proposal.objects.get(id=proposal_id).state == "expired"
    assert kinds(proposal_id)[-1] == ("proposal.expired", "")
    assert_nothing_sent(approvals_api, world, task_id)


# --- Stale proposals ----------------------------------------------------------------------------


def test_a_stale_proposal_is_flagged_and_the_platforms_409_closes_it(
    consoles: dict[str, Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
    approvals_api: httpx.Client,
) -> None:
    """The task moved after the proposal was made (another client reviewed it): the proposal
    page warns; approving anyway gets the platform's 409, which closes the proposal (C7)."""
    task_id = world["tasks"]["needs_review"]
    proposal_id, _ = propose_review(consoles["operator"], task_id)
    supervisor = consoles["supervisor"]
    assert 'id="proposal-drift"' not in supervisor.get(f"/proposals/{proposal_id}").text

    moved = review(approvals_api, world, token=world["tokens"]["reviewer"], outcome="FAILED")
    assert moved.status_code == 200, moved.text
    assert task_state(approvals_api, world, task_id) == ("FAILED", "4")

    page = supervisor.get(f"/proposals/{proposal_id}")
    drift = text_of(
        element(
            page.text, r'<div class="callout danger" role="alert" id="proposal-drift">.*?</div>'
        )
    )
    assert "The task has moved since this proposal was made." in drift
    assert "revision 4" in drift and "revision 3" in drift
    assert "The task is now FAILED." in drift
    assert text_of(element(page.text, r'<dd class="mono" id="current-revision">.*?</dd>')) == "4"

    answer = decide(supervisor, proposal_id, "approve")
    assert answer.status_code == 303
    outcome = supervisor.get(answer.headers["location"])
    [submission] = Submission.objects.filter(proposal_id=proposal_id)
    assert (submission.state, submission.http_status) == ("rejected", 409)
    assert submission.error_code in text_of(outcome.text)

    # Only the other client's review reached the audit: the stale one was refused.
    [record] = task_records(approvals_api, world, task_id)
    assert record["actor_id"] != actor_id_of(crew["supervisor"])

    page = consoles["operator"].get(f"/proposals/{proposal_id}")
    text = text_of(page.text)
    assert "The platform refused it, so this proposal is closed." in text
    state = element(
        page.text, r'<div class="callout [a-z]+" role="status" id="proposal-state">.*?</div>'
    )
    assert 'class="callout warning"' in state  # not the "ok" of an applied approval
    assert text_of(state).startswith("Closed: the platform refused it")
    recent = text_of(
        element(
            supervisor.get("/approvals").text,
            r'<section aria-labelledby="recent-title">.*?</section>',
        )
    )
    assert f"Review · {task_id[:8]} — Closed: the platform refused it" in recent
    assert submission.error_code in text
    # Recorded at the same moment as the submission's rejection (their order is not fixed).
    closed = ConsoleEvent.objects.get(proposal_id=proposal_id, kind="proposal.closed")
    assert closed.note.startswith("409 ")
    assert {kind for kind, _ in kinds(proposal_id)[-2:]} == {
        "submission.rejected",
        "proposal.closed",
    }
    assert "Closed: the platform refused it" in history_of(page.text)
    assert "Approve and send" not in text_of(supervisor.get(f"/proposals/{proposal_id}").text)
    proposal = Proposal.objects.get(id=proposal_id)
    assert proposal.decision_slot is None

    # A new decision needs a new proposal, and one can be made: the retry the task now allows,
    # and even another at the old revision (the refused one no longer holds it).
    confirm = wizard_to_confirm(consoles["operator"], task_id, "retry", retry_values())
    retry_proposal = wizard_submit(consoles["operator"], task_id, "retry", confirm.text)
    assert retry_proposal.status_code == 303
    assert retry_proposal.headers["location"].startswith("/proposals/")
    again = proposal_create(
        action="review",
        task_id=task_id,
        expected_revision="3",
        body=json.dumps(review_body()),
        proposed_by=crew["operator"].user,
    )
    assert again.created and again.proposal.id != proposal_id


# --- Policy and thresholds -----------------------------------------------------------------------


def test_with_approval_off_an_operator_submits_directly(
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """``orbit_server`` runs with the policy off: the wizard posts the decision at once, with the
    operator's own credential (AU6), and no proposal is made."""
    task_id = world["tasks"]["needs_review"]
    with signed_in(orbit_server.url, people["operator"]) as operator:
        task_page = text_of(operator.get(f"/tasks/{task_id}").text)
        assert "Review this task" in task_page and "Propose a review" not in task_page
        submission_id, receipt = review_through_console(operator, task_id)
    assert receipt.status_code == 200
    assert not Proposal.objects.filter(task_id=task_id).exists()
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.proposal_id) == ("succeeded", None)
    assert submission.sent_as_id == submission.created_by_id == people["operator"].user.pk
    [record] = task_records(api, world, task_id)
    assert record["actor_id"] == actor_id_of(people["operator"])


def test_two_approvals_are_needed_from_two_different_supervisors(
    threshold_server: DaphneServer,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    task_id = world["tasks"]["needs_review"]
    with (
        signed_in(threshold_server.url, crew["operator"]) as operator,
        signed_in(threshold_server.url, crew["supervisor"]) as first,
        signed_in(threshold_server.url, crew["supervisor_2"]) as second,
        httpx.Client(base_url=threshold_server.url, timeout=60) as api,
    ):
        proposal_id, _ = propose_review(operator, task_id)
        assert Proposal.objects.get(id=proposal_id).required_approvals == 2

        answer = decide(first, proposal_id, "approve", note="first look")
        assert answer.headers["location"] == f"/proposals/{proposal_id}"
        page = first.get(answer.headers["location"])
        assert "more approvals are needed" in messages_of(page.text)
        assert "1 of 2 approvals" in text_of(page.text)
        assert "Approve and send" not in text_of(page.text)  # already approved by this person
        queue = first.get("/approvals").text
        row = element(queue, rf'<tr id="proposal-{proposal_id}".*?</tr>')
        assert "1 of 2 approvals" in text_of(row) and 'data-live-version="1"' in row
        assert Proposal.objects.get(id=proposal_id).state == "pending"
        assert_nothing_sent(api, world, task_id)

        # The same supervisor approving again does not count twice.
        answer = decide(first, proposal_id, "approve")
        assert "already approved" in messages_of(first.get(answer.headers["location"]).text)
        assert Approval.objects.filter(proposal_id=proposal_id).count() == 1
        assert not Submission.objects.filter(task_id=task_id).exists()

        answer = decide(second, proposal_id, "approve", note="second look")
        assert answer.headers["location"].startswith("/submissions/")
        [record] = task_records(api, world, task_id)
        assert record["actor_id"] == actor_id_of(crew["supervisor_2"])
        proposal = Proposal.objects.get(id=proposal_id)
        assert (proposal.state, proposal.decided_by_id) == (
            "approved",
            crew["supervisor_2"].user.pk,
        )

        history = history_of(operator.get(f"/proposals/{proposal_id}").text)
        for person in ("operator", "supervisor", "supervisor_2"):
            assert crew[person].username in history
        assert [kind for kind, _ in kinds(proposal_id)].count("proposal.approved") == 2


def test_a_batch_needs_two_approvals_from_two_different_supervisors_as_a_proposal_does(
    threshold_server: DaphneServer,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    """Issue 29: one approvals model. Under the same policy, a batch approved by one supervisor
    of two waits, says so on the approvals queue and on its page, and is sent only after the
    second approval, with the second supervisor's credential (AU6)."""
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=3, label="two-eyes"
    )
    with (
        signed_in(threshold_server.url, crew["operator"]) as operator,
        signed_in(threshold_server.url, crew["supervisor"]) as first,
        signed_in(threshold_server.url, crew["supervisor_2"]) as second,
        httpx.Client(base_url=threshold_server.url, timeout=60) as api,
    ):
        batch_id = propose_batch(operator, incident)
        assert Batch.objects.get(id=batch_id).required_approvals == 2

        answer = batch_step(first, batch_id, "approve", note="first look")
        page = first.get(answer.headers["location"])
        assert "more approvals are needed" in messages_of(page.text)
        assert "1 of 2 approvals" in text_of(element(page.text, r'<p id="batch-approvals">.*?</p>'))
        assert 'id="approved-by-me"' in page.text and "Approve and send" not in page.text
        row = element(first.get("/approvals").text, rf'<tr id="batch-{batch_id}".*?</tr>')
        assert "1 of 2 approvals" in text_of(row) and 'data-live-version="1"' in row
        assert Batch.objects.get(id=batch_id).state == BatchState.PROPOSED
        for task_id in incident:
            assert_nothing_sent(api, world, task_id)

        answer = batch_step(first, batch_id, "approve")  # the same supervisor, again
        assert "already approved" in messages_of(first.get(answer.headers["location"]).text)
        assert Approval.objects.filter(batch_id=batch_id).count() == 1
        assert "Approve and send 3 decisions" in text_of(second.get(f"/batches/{batch_id}").text)

        batch_step(second, batch_id, "approve", note="second look")
        batch = Batch.objects.get(id=batch_id)
        assert batch.state == BatchState.RUNNING
        assert batch.sent_as_id == crew["supervisor_2"].user.pk
        assert f'id="batch-{batch_id}"' not in first.get("/approvals").text
        while async_to_sync(work_batches)():
            pass
        for task_id in incident:
            [record] = task_records(api, world, task_id)
            assert record["actor_id"] == actor_id_of(crew["supervisor_2"])
        approvals = Approval.objects.filter(batch_id=batch_id).order_by("created_at", "id")
        assert [(a.approver_id, a.note) for a in approvals] == [
            (crew["supervisor"].user.pk, "first look"),
            (crew["supervisor_2"].user.pk, "second look"),
        ]
        shown = text_of(operator.get(f"/batches/{batch_id}").text)
        assert "2 of 2 approvals" in shown


def propose_batch(console: Console, task_ids: list[str]) -> str:
    """Select, decide and confirm a review batch over the pages, as a person who must propose."""
    token = console.csrf_token()
    pairs = [("csrfmiddlewaretoken", token), ("action", "review"), ("scope", "ticked")]
    answer = console.post("/batches/new", [*pairs, *(("task", t) for t in task_ids)])
    batch_id = answer.headers["location"].rstrip("/").rsplit("/", 1)[1]
    decision = {
        "outcome": "FAILED",
        "result": '{"lost":"{{business_key}}"}',
        "reason": "broker outage INC-29: nothing was written",
        "evidence_ref": "https://status.example/INC-29",
        "template": "on",
    }
    checklist = ["checked_sample", "checked_left_out", "checked_external", "checked_lease"]
    ticked = [("csrfmiddlewaretoken", token), *((name, "on") for name in checklist)]
    console.post(f"/batches/{batch_id}/verify", ticked)
    console.post(f"/batches/{batch_id}/decide", [("csrfmiddlewaretoken", token), *decision.items()])
    count = str(len(task_ids))
    confirm = [("csrfmiddlewaretoken", token), ("count", count), ("confirm", "on")]
    console.post(f"/batches/{batch_id}/confirm", confirm)
    assert Batch.objects.get(id=batch_id).state == BatchState.PROPOSED
    return batch_id


def batch_step(console: Console, batch_id: str, verb: str, **fields: str) -> httpx.Response:
    data = [("csrfmiddlewaretoken", console.csrf_token()), *fields.items()]
    answer = console.post(f"/batches/{batch_id}/{verb}", data)
    assert answer.status_code == 302, answer.status_code
    return answer


def test_a_batch_proposal_nobody_approved_is_discarded_by_its_author_and_never_sent(
    threshold_server: DaphneServer,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    """Issue 30: an abandoned batch could not be discarded. Its author discards it while no
    supervisor has approved it: recorded, gone from the approvals queue, and no supervisor can
    approve it after; once approved by one supervisor, it can no longer be discarded."""
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=4, label="abandon"
    )
    with (
        signed_in(threshold_server.url, crew["operator"]) as operator,
        signed_in(threshold_server.url, crew["supervisor"]) as first,
        signed_in(threshold_server.url, crew["supervisor_2"]) as second,
        httpx.Client(base_url=threshold_server.url, timeout=60) as api,
    ):
        abandoned = propose_batch(operator, incident[:2])
        page = operator.get(f"/batches/{abandoned}").text
        assert f'action="/batches/{abandoned}/discard"' in page
        assert (
            f'action="/batches/{abandoned}/discard"' not in first.get(f"/batches/{abandoned}").text
        )
        refused = first.post(
            f"/batches/{abandoned}/discard", [("csrfmiddlewaretoken", first.csrf_token())]
        )
        assert refused.status_code == 403
        batch_step(operator, abandoned, "discard")
        batch = Batch.objects.get(id=abandoned)
        assert batch.state == BatchState.DISCARDED
        kinds = list(ConsoleEvent.objects.filter(batch=batch).values_list("kind", "actor_id"))
        assert ("batch.discarded", crew["operator"].user.pk) in kinds
        assert f'id="batch-{abandoned}"' not in first.get("/approvals").text
        answer = batch_step(first, abandoned, "approve")
        assert "that step is not open" in messages_of(first.get(answer.headers["location"]).text)
        assert Approval.objects.filter(batch_id=abandoned).count() == 0
        for task_id in incident[:2]:
            assert_nothing_sent(api, world, task_id)

        approved_once = propose_batch(operator, incident[2:])
        batch_step(first, approved_once, "approve")
        assert (
            f'action="/batches/{approved_once}/discard"'
            not in operator.get(f"/batches/{approved_once}").text
        )
        answer = batch_step(operator, approved_once, "discard")
        assert "can no longer be discarded" in messages_of(
            operator.get(answer.headers["location"]).text
        )
        assert Batch.objects.get(id=approved_once).state == BatchState.PROPOSED
        batch_step(second, approved_once, "approve")
        assert Batch.objects.get(id=approved_once).state == BatchState.RUNNING
