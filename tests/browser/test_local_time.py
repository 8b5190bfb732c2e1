"""Times are shown in the person's local time zone, with the exact UTC time on hover."""

from typing import Any

import pytest
from playwright.sync_api import Browser, expect

from tests.browser.conftest import BrowserWatch, open_task, sign_in
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer


@pytest.mark.browser
def test_times_follow_the_browsers_time_zone_with_utc_on_hover(
    browser: Browser,
    browser_watch: BrowserWatch,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    context = browser.new_context(timezone_id="Asia/Shanghai", locale="zh-CN")
    try:
        page = context.new_page()
        browser_watch.attach(page)  # CSP violations and script errors fail the test here too
        sign_in(page, orbit_server, people["operator"])
        open_task(page, orbit_server, world["tasks"]["needs_review"])

        created = page.locator("time[datetime]").first
        # The browser reported its zone (static/js/console.js): China Standard Time, UTC+8.
        expect(created).to_contain_text("CST")
        utc = created.get_attribute("datetime") or ""
        assert utc.endswith("Z")
        assert (created.get_attribute("title") or "").endswith("UTC")
        hours_utc = int(utc[11:13])
        shown = created.text_content() or ""
        assert int(shown[11:13]) == (hours_utc + 8) % 24
        assert page.locator("html").get_attribute("lang") == "zh-hans"
    finally:
        context.close()
