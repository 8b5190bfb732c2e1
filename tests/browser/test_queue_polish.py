"""What people used to Temporal UI, Sidekiq Web and Oban Web expect of a work queue (issue 30):
find a task by id, sort, a total count, "Newer" beside "Older", relative times with the exact
time on hover, copy buttons on ids, readable names, a dark theme, and field errors a screen
reader is told about."""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from tests.browser.conftest import sign_in
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

pytestmark = pytest.mark.browser


def test_a_field_in_error_is_described_by_its_error(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The field's aria-describedby names id_<field>_error: that element must exist and hold
    the error, or a screen reader announces nothing."""
    sign_in(page, orbit_server, people["operator"])
    page.goto(f"{orbit_server.url}/?business_key=a&business_key_prefix=b")
    field = page.locator("#id_business_key_prefix")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_have_attribute("aria-describedby", "id_business_key_prefix_error")
    expect(page.locator("#id_business_key_prefix_error")).to_contain_text(
        "Give a business key or its start, not both."
    )
    expect(field).to_have_accessible_description("Give a business key or its start, not both.")
