"""The notifications menu in real Chromium (issue 32): a supervisor's unread count rises live
when an operator proposes in their namespace, the list says what and links to it, and marking
it read brings the count down on every open page of theirs."""

from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.approvals.conftest import mint_crew, serve
from tests.browser.conftest import (
    mark,
    next_step,
    not_reloaded,
    sign_in,
    submit_decision,
    tick_all_checks,
)
from tests.browser.test_approvals import propose_review_in_browser
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer
from tests.support.worlds import new_task

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def notify_console(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    yield from serve("browser-notifications", django_db_blocker)


@pytest.fixture
def crew(settings: Any, world: dict[str, Any]) -> dict[str, TestPerson]:
    return mint_crew(settings, world, operator="operator", supervisor="supervisor")


def test_the_unread_count_rises_live_and_falls_when_read(
    page: Page,
    other_page: Any,
    notify_console: DaphneServer,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    supervisor: Page = other_page()
    sign_in(supervisor, notify_console, crew["supervisor"])
    count = supervisor.locator("#notify-count")
    expect(count).to_have_text("0 unread")
    mark(supervisor)

    sign_in(page, notify_console, crew["operator"])
    proposal_id = propose_review_in_browser(page, notify_console, world["tasks"]["needs_review"])

    expect(count).to_have_text("1 unread")
    assert not_reloaded(supervisor)
    expect(page.locator("#notify-count")).to_have_text("0 unread")  # not the author's to hear

    second: Page = other_page()
    sign_in(second, notify_console, crew["supervisor"])
    second.get_by_role("link", name="Notifications", exact=True).click()
    item = second.locator("#notification-items li").first
    expect(item).to_contain_text("A proposal waits for your approval")
    expect(item.get_by_role("link")).to_have_attribute("href", f"/proposals/{proposal_id}")
    second.get_by_role("button", name="Mark all read").click()
    expect(second.locator("#notify-count")).to_have_text("0 unread")
    expect(count).to_have_text("0 unread")  # the first page, live


def test_the_wizard_shows_the_namespaces_evidence_example_and_checks_it(
    page: Page,
    notify_console: DaphneServer,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    from orbit_console.decisions.evidence import evidence_policy_clear, evidence_policy_set

    namespace = world["namespace_id"]
    evidence_policy_set(
        namespace_id=namespace,
        pattern=r"INC-(\d+)",
        example="INC-1234",
        link_template="https://tracker.example.com/browse/INC-{1}",
    )
    try:
        sign_in(page, notify_console, crew["operator"])
        task_id = world["tasks"]["needs_review"]
        page.goto(f"{notify_console.url}/tasks/{task_id}")
        page.get_by_role("link", name="Propose a review").click()
        tick_all_checks(page)
        next_step(page)
        expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Decide")
        field = page.locator("#id_evidence_ref")
        expect(field).to_have_attribute("placeholder", "INC-1234")
        expect(page.locator("main")).to_contain_text("look like INC-1234")
        page.locator("input[name=outcome][value=SUCCEEDED]").check()
        page.fill("#id_result", '{"confirmed": true}')
        page.fill("#id_reason", "Checked the ledger")
        page.fill("#id_evidence_ref", "evidence:free-text")
        next_step(page)
        expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Decide")
        expect(page.locator("main")).to_contain_text(
            "In this namespace an evidence reference looks like INC-1234."
        )
        page.fill("#id_evidence_ref", "INC-77")
        next_step(page)
        expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Confirm")
        submit_decision(page, "execution_settled")
        expect(page.locator("#proposal-state")).to_contain_text("Waiting for approval")
        link = page.locator("#proposal-evidence a")
        expect(link).to_have_attribute("href", "https://tracker.example.com/browse/INC-77")
    finally:
        evidence_policy_clear(namespace_id=namespace)


def test_the_live_count_speaks_the_pages_language(
    page: Page,
    other_page: Any,
    notify_console: DaphneServer,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    """The count the socket pushes is said in the reader's language, as the page around it (it
    came in English on a 简体中文 page)."""
    supervisor: Page = other_page()
    sign_in(supervisor, notify_console, crew["supervisor"])
    supervisor.select_option("#language-select", "zh-hans")  # sends itself
    expect(supervisor.locator("html")).to_have_attribute("lang", "zh-hans")
    count = supervisor.locator("#notify-count")
    expect(count).to_have_text("0 条未读")

    sign_in(page, notify_console, crew["operator"])
    propose_review_in_browser(page, notify_console, new_task(world, "needs_review"))
    expect(count).to_have_text("1 条未读")
