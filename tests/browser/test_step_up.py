"""A fresh sign-in before deciding (issue 31, step-up): rejecting or approving a proposal with a
sign-in older than ``STEP_UP_MAX_AGE_SECONDS`` sends the supervisor to type their password
again, and back to the proposal with what they typed; only then is the decision taken."""

import time
from collections.abc import Iterator
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Page, expect

from orbit_console.decisions.chain import entry_hash
from orbit_console.decisions.models import ConsoleEvent
from tests.approvals.conftest import pending_retry
from tests.browser.conftest import sign_in
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

pytestmark = pytest.mark.browser

MAX_AGE = 4


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    with django_db_blocker.unblock():
        started = DaphneServer("step-up", env={"STEP_UP_MAX_AGE_SECONDS": str(MAX_AGE)}).start()
    yield started
    started.stop()


def test_rejecting_after_the_sign_in_grew_old_asks_for_the_password_and_keeps_the_reason(
    page: Page, server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    proposal = pending_retry(world, people["operator"])
    supervisor = people["supervisor"]
    reason = "The evidence reference points at last week's incident"
    sign_in(page, server, supervisor)
    page.goto(f"{server.url}/proposals/{proposal.id}")
    time.sleep(MAX_AGE + 1)
    page.fill("#reject-reason", reason)
    page.locator("#reject-reason").locator("xpath=ancestor::form").locator(
        "button[type=submit]"
    ).click()

    expect(page.locator("#step-up-why")).to_be_visible()
    proposal.refresh_from_db()
    assert proposal.is_pending  # nothing decided yet
    page.fill("#id_password", "not the password")
    page.locator("#step-up-form button[type=submit]").click()
    expect(page.locator("#step-up-error")).to_be_visible()
    page.fill("#id_password", supervisor.password)
    confirmed_at = timezone.now()
    page.locator("#step-up-form button[type=submit]").click()

    expect(page).to_have_url(f"{server.url}/proposals/{proposal.id}")
    expect(page.locator("#reject-reason")).to_have_value(reason)
    page.locator("#reject-reason").locator("xpath=ancestor::form").locator(
        "button[type=submit]"
    ).click()
    expect(page.locator("#proposal-state")).to_contain_text("Rejected")
    proposal.refresh_from_db()
    assert not proposal.is_pending
    # The audit record says how and when the supervisor authenticated before deciding.
    event = ConsoleEvent.objects.get(proposal=proposal, kind="proposal.rejected")
    assert event.authenticated_how == "password"
    assert event.authenticated_at is not None
    assert abs((event.authenticated_at - confirmed_at).total_seconds()) < 3
    assert event.entry_hash == entry_hash(event)  # covered by the record's hash chain


def test_a_fresh_sign_in_decides_at_once(
    page: Page, server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    proposal = pending_retry(world, people["operator"])
    sign_in(page, server, people["supervisor"])
    page.goto(f"{server.url}/proposals/{proposal.id}")
    page.fill("#reject-reason", "Not this one")
    page.locator("#reject-reason").locator("xpath=ancestor::form").locator(
        "button[type=submit]"
    ).click()
    expect(page.locator("#proposal-state")).to_contain_text("Rejected")
