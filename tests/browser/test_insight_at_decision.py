"""Insight where people decide, in Chromium (issue 43, items 2 and 3), one flow in both
languages on a 390 px phone: the work queue marks the task past its waiting-time objective; its
review's decide step shows what was decided before — the most useful first, the evidence that
links as a link — and leaves the decision's fields empty. Screenshots in the test logs, light
and dark."""

from datetime import timedelta
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from orbit_console.insight.objectives import objective_set
from tests.browser.conftest import next_step, sign_in, tick_all_checks
from tests.insight.test_at_decision import parked, precedents  # noqa: F401 -- a fixture
from tests.support.people import TestPerson
from tests.support.servers import LOG_DIR, DaphneServer

pytestmark = pytest.mark.browser

PHONE = {"width": 390, "height": 844}


def no_sideways_scroll(page: Page) -> None:
    width, client = page.evaluate(
        "() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]"
    )
    assert width <= client, f"the page scrolls sideways: {width} > {client}"


def snapshot(page: Page, name: str) -> None:
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(LOG_DIR / f"insight-{name}.png"), full_page=True)


def test_the_queue_marks_a_task_past_its_objective_and_its_decide_step_shows_precedent(
    page: Page,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    precedents: dict[str, Any],  # noqa: F811 -- the fixture imported above
) -> None:
    objective_set(namespace_id=world["namespace_id"], decide_within=timedelta(hours=4))
    parked(world, "needs_review", ago=timedelta(hours=5))
    task_id = world["tasks"]["needs_review"]
    page.set_viewport_size(PHONE)
    sign_in(page, orbit_server, people["operator"])

    for language, past_mark, heading in (
        ("en", "past its 4h objective", "Decided before"),
        ("zh-Hans", "已超过 4h 目标", "以往的决定"),
    ):
        page.context.set_extra_http_headers({"Accept-Language": language})
        page.goto(f"{orbit_server.url}/")
        row = page.locator("tr", has=page.locator(f"a[href='/tasks/{task_id}']"))
        mark = row.locator("[data-objective=past]")
        expect(mark).to_have_text(past_mark)
        expect(mark).to_be_visible()
        no_sideways_scroll(page)
        snapshot(page, f"queue-{language}")

        page.goto(f"{orbit_server.url}/tasks/{task_id}/review")
        tick_all_checks(page)
        next_step(page)
        panel = page.locator("#precedent")
        expect(panel.get_by_role("heading", level=2)).to_have_text(heading)
        items = panel.locator("ol.precedent-list > li")
        expect(items).to_have_count(5)
        expect(items.first).to_have_attribute("data-decision", precedents["other_queue"].id)
        link = items.nth(1).locator("a.evidence-link")
        expect(link).to_have_attribute("href", "https://tracker.example.com/browse/INC-3")
        # It informs; nothing of it is filled into the decision.
        expect(page.locator("#id_reason")).to_have_value("")
        expect(page.locator("#id_evidence_ref")).to_have_value("")
        no_sideways_scroll(page)
        snapshot(page, f"decide-{language}")

    page.emulate_media(color_scheme="dark")
    snapshot(page, "decide-dark")
    page.emulate_media(color_scheme="light")
