"""Four eyes in real Chromium (issue 5, Acceptance): an operator proposes a review, the
supervisors' approvals queue shows it live, a supervisor approves it, and the platform's audit
record names the supervisor (AU6); the proposal's history names both people.

The console runs with approval required (the production default), on a server of its own;
operators and supervisors are minted under that policy.
"""

import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Locator, Page, expect

from orbit_console.decisions.models import Proposal
from orbit_console.decisions.proposals import proposal_create
from orbit_console.people.models import OrbitCredential
from tests.approvals.conftest import mint_crew, serve
from tests.browser.conftest import (
    mark,
    not_reloaded,
    review_to_confirm,
    sign_in,
    submit_decision,
    task_operations,
)
from tests.support.orbit import REVIEW_REVISION, review_body
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def approvals_console(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """API and console with approval required for reviews and retries."""
    yield from serve("browser-approvals", django_db_blocker)


@pytest.fixture
def crew(settings: Any, world: dict[str, Any]) -> dict[str, TestPerson]:
    return mint_crew(
        settings, world, operator="operator", supervisor="supervisor", supervisor_2="supervisor"
    )


def open_live_queue(page: Page, server: DaphneServer, person: TestPerson) -> None:
    """Sign in and open the approvals queue, connected to its live feed."""
    sign_in(page, server, person)
    page.goto(f"{server.url}/approvals")
    expect(page.locator("h1")).to_have_text("Approvals")
    expect(page.locator("#approvals-live")).to_have_text("live")
    mark(page)


def step(page: Page, label: str) -> Locator:
    """The entry of the proposal's history whose label is exactly ``label``."""
    strong = page.locator("strong", has_text=re.compile(rf"^{re.escape(label)}$"))
    return page.locator("#proposal-history li", has=strong)


def propose_review_in_browser(page: Page, server: DaphneServer, task_id: str) -> str:
    """Walk the review wizard as an operator who must propose; the proposal's id."""
    review_to_confirm(page, server, task_id, result='{"confirmed": true}', link="Propose a review")
    expect(page.locator("button[name=nav][value=submit]")).to_have_text("Propose the review")
    submit_decision(page, "execution_settled")
    expect(page.locator("#proposal-state")).to_contain_text("Waiting for approval")
    return page.url.rstrip("/").rsplit("/", 1)[1]


def test_a_proposed_review_reaches_the_supervisor_live_and_goes_out_as_the_supervisor_AU6(
    page: Page,
    other_page: Any,
    approvals_console: DaphneServer,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    task_id = world["tasks"]["needs_review"]
    supervisor_page: Page = other_page()
    watcher_page: Page = other_page()
    open_live_queue(supervisor_page, approvals_console, crew["supervisor"])
    open_live_queue(watcher_page, approvals_console, crew["supervisor_2"])

    sign_in(page, approvals_console, crew["operator"])
    proposal_id = propose_review_in_browser(page, approvals_console, task_id)
    assert Proposal.objects.get(id=proposal_id).task_id == task_id
    # The proposer's page follows the task (issue 15: it said "Waiting" until reloaded).
    expect(page.locator("#page-live")).to_have_text("live")
    mark(page)

    # Both supervisors' queues show it without a reload.
    row = supervisor_page.locator(f"#proposal-{proposal_id}")
    expect(row).to_be_visible()
    expect(row).to_contain_text(crew["operator"].username)
    expect(row).to_contain_text(task_id[:8])
    expect(watcher_page.locator(f"#proposal-{proposal_id}")).to_be_visible()
    expect(supervisor_page.locator("#no-proposals")).to_be_hidden()
    assert not_reloaded(supervisor_page) and not_reloaded(watcher_page)

    # The supervisor opens it, sees it beside the task as it is now, and approves it.
    row.get_by_role("link", name="Review", exact=True).click()
    expect(supervisor_page.locator("#proposal-state")).to_contain_text("Waiting for approval")
    expect(supervisor_page.locator("#current-revision")).to_have_text("3")
    expect(supervisor_page.locator("#proposal-drift")).to_have_count(0)
    supervisor_page.fill("#approve-note", "Matches the reconciliation report")
    supervisor_page.get_by_role("button", name="Approve and send").click()
    expect(supervisor_page).to_have_url(re.compile(r"/submissions/[0-9a-f]{32}$"))
    audit_id_cell = supervisor_page.locator("#receipt-audit-id")
    expect(audit_id_cell).not_to_be_empty()
    audit_id = (audit_id_cell.text_content() or "").strip()

    # The platform's audit record names the supervisor, not the operator (AU6).
    with httpx.Client(base_url=approvals_console.url, timeout=60) as api:
        [record] = [item for item in task_operations(api, world, task_id) if item["id"] == audit_id]
    assert record["action"] == "task.review"
    supervisor_actor = OrbitCredential.objects.get(user=crew["supervisor"].user).actor_id
    operator_actor = OrbitCredential.objects.get(user=crew["operator"].user).actor_id
    assert record["actor_id"] == supervisor_actor != operator_actor

    # The decided proposal leaves the other supervisor's open queue, live.
    expect(watcher_page.locator(f"#proposal-{proposal_id}")).to_have_count(0)
    assert not_reloaded(watcher_page)

    # The proposer's page, left open, says so without a reload.
    expect(page.locator("#proposal-state")).to_contain_text("Approved and sent")
    expect(page.locator("#proposal-submission")).to_be_visible()
    assert not_reloaded(page)

    # The proposal's history names both people.
    page.goto(f"{approvals_console.url}/proposals/{proposal_id}")
    expect(page.locator("#proposal-state")).to_contain_text("Approved and sent")
    history = page.locator("#proposal-history")
    expect(history).to_contain_text("Proposed for approval")
    expect(step(page, "Proposed for approval")).to_contain_text(crew["operator"].username)
    expect(step(page, "Approved")).to_contain_text(crew["supervisor"].username)
    expect(history).to_contain_text("Receipt received")
    expect(history).to_contain_text("Matches the reconciliation report")


def test_a_rejection_reaches_the_proposers_open_page_and_their_box_says_why(
    page: Page,
    other_page: Any,
    approvals_console: DaphneServer,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    """Issue 15: a proposer's page said "Waiting for approval" until reloaded, and a rejected
    proposal just left the operator's "waiting" box. The open page now says it was rejected,
    live, and the work queue's box says by whom and why."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, approvals_console, crew["operator"])
    proposal_id = propose_review_in_browser(page, approvals_console, task_id)
    expect(page.locator("#page-live")).to_have_text("live")
    mark(page)

    supervisor_page: Page = other_page()
    sign_in(supervisor_page, approvals_console, crew["supervisor"])
    supervisor_page.goto(f"{approvals_console.url}/proposals/{proposal_id}")
    reason = "The evidence reference points at last month's report"
    supervisor_page.fill("#reject-reason", reason)
    supervisor_page.get_by_role("button", name="Reject").click()
    expect(supervisor_page.locator("#proposal-state")).to_contain_text("Rejected by a supervisor")

    expect(page.locator("#proposal-state")).to_contain_text("Rejected by a supervisor")
    assert not_reloaded(page)
    page.goto(f"{approvals_console.url}/")
    own = page.locator("#own-proposals")
    expect(own).to_contain_text("Rejected by a supervisor")
    expect(own).to_contain_text(f"{crew['supervisor'].username}: {reason}")


def test_a_long_or_blank_reason_is_refused_at_its_field_and_never_cut(
    page: Page, approvals_console: DaphneServer, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    """Issue 30: the reject and note fields cut a paste at 1 024 characters without a word (the
    wizard never cuts), and a rejection of spaces alone was told in a banner, away from the
    field. Now nothing is cut: the counter says how much is too much, the server refuses at the
    field and keeps the text; the proposal stays pending."""
    proposal = proposal_create(
        action="review",
        task_id=world["tasks"]["needs_review_workflow"],
        expected_revision=REVIEW_REVISION,
        body=json.dumps(review_body()),
        proposed_by=crew["operator"].user,
    ).proposal
    sign_in(page, approvals_console, crew["supervisor"])
    page.goto(f"{approvals_console.url}/proposals/{proposal.id}")
    reason = page.locator("#reject-reason")
    pasted = "the evidence does not hold; " * 60  # 1 680 characters
    reason.fill(pasted)
    expect(reason).to_have_value(pasted)  # not cut at 1 024
    expect(page.locator("#reject-reason_counter")).to_contain_text("656 characters too many")
    page.get_by_role("button", name="Reject").click()
    error = page.locator("#reject-reason-error")
    expect(error).to_contain_text("656 characters too many: nothing was cut")
    expect(reason).to_have_value(pasted)
    expect(reason).to_have_attribute("aria-describedby", re.compile("reject-reason-error"))
    expect(page.locator(".messages")).to_have_count(0)

    reason.fill("   ")
    page.get_by_role("button", name="Reject").click()
    expect(page.locator("#reject-reason-error")).to_contain_text("spaces alone")
    note = page.locator("#approve-note")
    note.fill("x" * 1100)
    expect(note).to_have_value("x" * 1100)
    page.get_by_role("button", name="Approve and send").click()
    expect(page.locator("#approve-note-error")).to_contain_text("76 characters too many")
    proposal.refresh_from_db()
    assert proposal.state == "pending"
