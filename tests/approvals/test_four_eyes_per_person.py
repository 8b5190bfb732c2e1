"""Four eyes is judged per person (issue 39, item 3; docs/approvals.md "One person, several
accounts"): approving and rejecting refuse the proposer and every account linked to the
proposer, for proposals and batches alike, and two accounts of one person count as one
approval. In process, against the embedded API."""

from typing import Any

import pytest
from django.test import Client

from orbit_console.decisions import batches
from orbit_console.decisions.models import Approval, BatchState
from orbit_console.decisions.proposals import (
    ProposalRefused,
    proposal_approve,
    proposal_create,
    proposal_reject,
)
from orbit_console.people.accounts import account_company, accounts_link
from orbit_console.people.models import Account
from tests.approvals.conftest import pending_retry, required_policy
from tests.decisions.test_batches import DECISION, select
from tests.support.people import TestPerson, make_person


def linked(world: dict[str, Any], to: TestPerson, *roles: str) -> TestPerson:
    """Another account of ``to``'s person: a company account, linked."""
    other = make_person(world, *roles)
    account_company(user=other.user)
    accounts_link(user=other.user, other=to.user, how=Account.ADMINISTRATOR, by="test")
    return other


def test_no_account_of_the_proposer_approves_or_rejects_their_proposal(
    world: dict[str, Any], crew: dict[str, TestPerson]
) -> None:
    operator = crew["operator"]
    proposal = pending_retry(world, operator)
    second = linked(world, operator, "supervisor")
    third = linked(world, second, "supervisor")  # linked through the second: still one person
    for account in (second, third):
        with pytest.raises(ProposalRefused, match="another account of yours"):
            proposal_approve(proposal_id=proposal.id, approver=account.user)
        with pytest.raises(ProposalRefused, match="another account of yours"):
            proposal_reject(proposal_id=proposal.id, supervisor=account.user, reason="mine")
    proposal.refresh_from_db()
    assert proposal.is_pending and not Approval.objects.filter(proposal=proposal).exists()
    # A supervisor's own proposal: nobody rejects it either (withdrawing is theirs).
    own = proposal_create(
        action="review",
        task_id=world["tasks"]["needs_review"],
        queue_id=world["queue_id"],
        namespace_id=world["namespace_id"],
        expected_revision="1",
        body="{}",
        proposed_by=crew["supervisor"].user,
    ).proposal
    assert own.proposed_by_id == crew["supervisor"].user.pk
    with pytest.raises(ProposalRefused, match="withdraw"):
        proposal_reject(proposal_id=own.id, supervisor=crew["supervisor"].user, reason="no")
    # Another person decides.
    assert proposal_approve(proposal_id=proposal.id, approver=crew["supervisor"].user)


def test_two_accounts_of_one_supervisor_are_one_approval(
    world: dict[str, Any], crew: dict[str, TestPerson], settings: Any
) -> None:
    settings.CONSOLE_APPROVAL_POLICY = required_policy(approvers=2)
    proposal = pending_retry(world, crew["operator"])
    supervisor = crew["supervisor"]
    again = linked(world, supervisor, "supervisor")
    assert proposal_approve(proposal_id=proposal.id, approver=supervisor.user) is None
    with pytest.raises(ProposalRefused, match="already approved"):
        proposal_approve(proposal_id=proposal.id, approver=again.user)
    assert proposal_approve(proposal_id=proposal.id, approver=crew["supervisor_2"].user)


def test_no_account_of_a_batchs_author_approves_or_rejects_it(
    world: dict[str, Any], crew: dict[str, TestPerson]
) -> None:
    from orbit_console.ledger.seed import seed_incident

    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2
    )
    operator = crew["operator"]
    batch = select(world, operator, incident)
    batches.batch_decide(batch, person=operator.user, decision=DECISION)
    batch = batches.batch_submit(batch, person=operator.user, typed_count=2)
    assert batch.state == BatchState.PROPOSED
    second = linked(world, operator, "supervisor")
    with pytest.raises(ProposalRefused, match="another account of yours"):
        batches.batch_approve(batch_id=batch.id, approver=second.user)
    with pytest.raises(ProposalRefused, match="another account of yours"):
        batches.batch_reject(batch_id=batch.id, supervisor=second.user, reason="mine")
    batch.refresh_from_db()
    assert batch.state == BatchState.PROPOSED


def test_the_approvals_queue_marks_the_proposals_of_ones_other_accounts_and_company_people(
    world: dict[str, Any], crew: dict[str, TestPerson]
) -> None:
    operator = crew["operator"]
    account_company(user=operator.user)
    proposal = pending_retry(world, operator)
    second = linked(world, operator, "supervisor")
    browser = Client()
    browser.force_login(second.user)
    page = browser.get("/approvals").content.decode()
    assert f'id="own-{proposal.id}"' in page  # "yours: another supervisor approves it"
    row = page[page.index(f'id="proposal-{proposal.id}"') :]
    assert '<span class="flag company"' in row[: row.index("</tr>")]
    detail = browser.get(f"/proposals/{proposal.id}").content.decode()
    assert f'action="/proposals/{proposal.id}/approve"' not in detail
    # Nor is it counted as waiting for them.
    other = Client()
    other.force_login(crew["supervisor"].user)
    assert f'id="own-{proposal.id}"' not in other.get("/approvals").content.decode()
