"""Work in progress visible where people decide (issue 30), in real Chromium: the work queue
marks a row whose task has a proposal pending, and a retried one with what its new task became;
the task page says a proposal waits (and offers no second one); a supervisor sees in the
navigation, live, how many proposals wait for them, lands on the approvals when any do, and
after deciding one is told which waits next."""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.approvals.conftest import propose_review
from tests.browser.conftest import mark, not_reloaded, retried_until_it_ended, sign_in
from tests.browser.test_one_truth import crew, four_eyes  # noqa: F401
from tests.console.web import signed_in
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

pytestmark = pytest.mark.browser


def test_the_queue_and_the_task_page_show_a_pending_proposal_and_a_retry_outcome(
    page: Page,
    four_eyes: DaphneServer,  # noqa: F811
    crew: dict[str, TestPerson],  # noqa: F811
    world: dict[str, Any],
) -> None:
    task_id = world["tasks"]["needs_review"]
    operator = crew["operator"]
    with signed_in(four_eyes.url, operator) as console:
        proposal_id, _ = propose_review(console, task_id)
    successor = retried_until_it_ended(world, operator, "SUCCEEDED")

    second = crew["second_operator"]
    sign_in(page, four_eyes, second)
    expect(page).to_have_url(f"{four_eyes.url}/")  # an operator lands on the work queue
    pending_row = page.locator("#results tr", has=page.locator(f"a[href='/tasks/{task_id}']"))
    expect(pending_row.locator("a.flag", has_text="proposal pending")).to_be_visible()
    cancelled = world["tasks"]["cancelled"]
    retried_row = page.locator("#results tr", has=page.locator(f"a[href='/tasks/{cancelled}']"))
    mark = retried_row.locator("a.flag", has_text="retried → SUCCEEDED")
    expect(mark).to_be_visible()
    expect(mark).to_have_attribute("href", f"/tasks/{successor}")

    pending_row.locator(f"a[href='/tasks/{task_id}']").first.click()
    banner = page.locator("#pending-proposal")
    expect(banner).to_contain_text("Pending approval by supervisors")
    expect(banner).to_contain_text(f"proposed by {operator.username}")
    expect(banner.locator(f"a[href='/proposals/{proposal_id}']")).to_be_visible()
    expect(page.get_by_role("link", name="Propose a review")).to_have_count(0)
    expect(page.locator("#recovery-panel")).to_contain_text("waiting for approval")
    expect(page.locator("#decision-pending")).to_contain_text("pending approval")
    # The wizard's address, opened anyway, says so at once (it took three steps to learn).
    page.goto(f"{four_eyes.url}/tasks/{task_id}/review")
    expect(page.locator("h1")).to_have_text("This task cannot be reviewed now")
    expect(page.locator("main")).to_contain_text(
        f"made by {operator.username}, is waiting for a supervisor's approval"
    )


def test_a_supervisor_sees_what_waits_lands_there_and_is_told_what_waits_next(
    page: Page,
    four_eyes: DaphneServer,  # noqa: F811
    crew: dict[str, TestPerson],  # noqa: F811
    world: dict[str, Any],
) -> None:
    supervisor = crew["supervisor"]
    sign_in(page, four_eyes, supervisor)
    expect(page).to_have_url(f"{four_eyes.url}/")  # nothing waits: the work queue
    count = page.locator("#nav-waiting")
    expect(count).to_have_attribute("data-count", "0")
    mark(page)

    with signed_in(four_eyes.url, crew["operator"]) as console:
        first, _ = propose_review(console, world["tasks"]["needs_review"])
        expect(count).to_have_attribute("data-count", "1")  # live, no reload
        second, _ = propose_review(console, world["tasks"]["needs_review_2"])
    expect(count).to_have_attribute("data-count", "2")
    expect(count).to_contain_text("2")
    assert not_reloaded(page)

    # Signing in again lands on the approvals, since proposals wait.
    page.context.clear_cookies()
    sign_in(page, four_eyes, supervisor)
    expect(page).to_have_url(f"{four_eyes.url}/approvals")

    page.goto(f"{four_eyes.url}/proposals/{first}")
    page.fill("#reject-reason", "Not enough evidence yet")
    page.get_by_role("button", name="Reject").click()
    expect(page.locator(".messages")).to_contain_text("Next waiting:")
    page.locator("#next-waiting").click()
    expect(page).to_have_url(f"{four_eyes.url}/proposals/{second}")
    expect(page.locator("#nav-waiting")).to_have_attribute("data-count", "1")

    page.fill("#reject-reason", "Not enough evidence yet")
    page.get_by_role("button", name="Reject").click()
    expect(page.locator(".messages")).to_contain_text("Next waiting: none left")
    expect(page.locator("#nav-waiting")).to_have_attribute("data-count", "0")


def test_an_auditor_lands_on_the_audit_explorer(
    page: Page,
    four_eyes: DaphneServer,  # noqa: F811
    crew: dict[str, TestPerson],  # noqa: F811
) -> None:
    sign_in(page, four_eyes, crew["auditor"])
    expect(page).to_have_url(f"{four_eyes.url}/audit")
