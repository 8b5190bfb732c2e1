"""One truth on every page (issue 30), in real Chromium: a live task page updates everything
that depends on the task's state together when it moves; "My decisions" adds the rows of
decisions made or approved elsewhere, and lists what waits for approval; Back never shows a
stale page marked "live"."""

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from tests.approvals.conftest import decide, mint_crew, propose_review, serve
from tests.browser.conftest import mark, not_reloaded, open_task, sign_in
from tests.console.web import signed_in
from tests.support.orbit import review
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def four_eyes(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """API and console with approval required for reviews and retries."""
    yield from serve("browser-one-truth", django_db_blocker)


@pytest.fixture
def crew(settings: Any, world: dict[str, Any]) -> dict[str, TestPerson]:
    return mint_crew(
        settings,
        world,
        operator="operator",
        second_operator="operator",
        supervisor="supervisor",
        auditor="auditor",
    )


def test_a_live_task_page_never_shows_two_states_at_once(
    page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """An auditor has a NEEDS_REVIEW task open; another client reviews it. The title's badge,
    "State", "Revision", "Result" and the recovery box all say what the task is now, together,
    without a reload (the title, the facts and the result used to stay as loaded)."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, orbit_server, people["auditor"])
    open_task(page, orbit_server, task_id)
    expect(page.locator("#timeline-live")).to_have_text("live")
    mark(page)
    expect(page.locator("#task-state")).to_contain_text("NEEDS_REVIEW")
    expect(page.locator("#task-result")).to_contain_text("No result yet.")
    before = page.locator("#task-revision").inner_text()

    response = review(api, world, "needs_review")
    assert response.status_code == 200, response.text

    expect(page.locator("#recovery-state")).not_to_contain_text(f"at revision {before}.")
    after = page.locator("#task-summary").get_attribute("data-revision")
    state = page.locator("#task-summary").get_attribute("data-state")
    assert after != before and state != "NEEDS_REVIEW"
    expect(page.locator("#task-revision")).to_have_text(str(after))
    expect(page.locator("#task-state")).to_contain_text(str(state))
    expect(page.locator("#task-title")).to_contain_text(str(state))
    expect(page.locator("#task-title")).not_to_contain_text("NEEDS_REVIEW")
    expect(page.locator("#task-result")).not_to_contain_text("No result yet.")
    expect(page.locator("#recovery-state")).to_contain_text(f"Now {state} at revision {after}.")
    assert not_reloaded(page)


def test_back_never_shows_a_stale_page_marked_live(
    page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """The task page, left for another page while the task moved and then brought back with
    Back, shows the task as it is now (the browser's copy showed the old state, "live")."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, orbit_server, people["auditor"])
    open_task(page, orbit_server, task_id)
    expect(page.locator("#timeline-live")).to_have_text("live")
    page.goto(f"{orbit_server.url}/audit")
    expect(page.locator("h1")).to_be_visible()

    response = review(api, world, "needs_review")
    assert response.status_code == 200, response.text

    page.go_back()
    expect(page.locator("#timeline-live")).to_have_text("live")
    expect(page.locator("#task-state")).not_to_contain_text("NEEDS_REVIEW")
    expect(page.locator("#task-title")).not_to_contain_text("NEEDS_REVIEW")


def test_my_decisions_lists_what_waits_and_adds_the_decision_approved_elsewhere(
    page: Page,
    four_eyes: DaphneServer,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    """The operator's "My decisions" is open. A proposal they make in another tab appears under
    "Waiting for approval"; when a supervisor approves it, it leaves that list and the decision
    it became appears — all without a reload (no row was ever added live before)."""
    sign_in(page, four_eyes, crew["operator"])
    page.goto(f"{four_eyes.url}/decisions")
    expect(page.locator("#decisions-live")).to_have_text("live")
    expect(page.locator("#no-waiting")).to_be_visible()
    mark(page)

    with signed_in(four_eyes.url, crew["operator"]) as operator:
        proposal_id, _ = propose_review(operator, world["tasks"]["needs_review"])
    waiting = page.locator(f"#waiting-proposal-{proposal_id}")
    expect(waiting).to_be_visible()
    expect(waiting).to_contain_text("pending approval")
    expect(page.locator("#no-waiting")).to_be_hidden()

    with signed_in(four_eyes.url, crew["supervisor"]) as supervisor:
        assert decide(supervisor, proposal_id, "approve").status_code == 303
    expect(waiting).to_have_count(0)
    row = page.locator("#decision-rows > li").first
    expect(row).to_contain_text("Review")
    expect(row).to_contain_text(f"approved by {crew['supervisor'].username}")
    expect(page.locator("#no-decisions")).to_be_hidden()
    assert not_reloaded(page)
