"""Sessions and drafts in Chromium (issue 30): what a person sees when their session ends.

- The live badges stop saying "live": they say "signed out", and the page offers to sign in.
- Next on a wizard step after the session ended leads to a sign-in page that says why, and
  back to the same step with everything typed (a task that moved meanwhile says so).
- The page's own "sign in to continue" on a wizard step keeps the step too.
- An old tab, after signing in again in another, is refused for its CSRF token, keeps the step
  and offers to continue.
- Before an idle end the page warns, and "stay signed in" keeps the session.
- Those pages fit a phone, in both languages, with no serious accessibility violation.

Sessions end as time or another tab ends them: their row is deleted in the database.
"""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.contrib.sessions.models import Session
from playwright.sync_api import BrowserContext, Page, expect

from tests.approvals.conftest import pending_retry
from tests.browser.conftest import next_step, open_task, sign_in, tick_all_checks
from tests.browser.test_every_page import PHONE, problems_of
from tests.support.orbit import review
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer

pytestmark = pytest.mark.browser

REASON = "Checked the object store: the write never happened"
EVIDENCE = "evidence:reconciliation-001"
RESULT = '{"confirmed": true, "sequence": 9007199254740993}'
IDLE_SECONDS = 12  # the page warns half of it, 6 s, before the end (ops/sessions.py)


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """Sockets look at their session every second."""
    with django_db_blocker.unblock():
        started = DaphneServer("sessions-browser", env={"SESSION_RECHECK_SECONDS": "1"}).start()
    yield started
    started.stop()


@pytest.fixture(scope="module")
def idle_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """Sessions end after IDLE_SECONDS idle seconds: the page warns half of that before."""
    with django_db_blocker.unblock():
        env = {"SESSION_IDLE_TIMEOUT": str(IDLE_SECONDS), "SESSION_RECHECK_SECONDS": "1"}
        started = DaphneServer("sessions-idle", env=env).start()
    yield started
    started.stop()


def session_key(context: BrowserContext) -> str:
    [key] = [c["value"] for c in context.cookies() if c["name"] == "sessionid"]
    return key


def end_session(context: BrowserContext) -> None:
    """The session ends on the server (expired, idle, or ended elsewhere)."""
    assert Session.objects.filter(session_key=session_key(context)).delete()[0] == 1


def type_a_decision(page: Page, server: DaphneServer, task_id: str) -> None:
    """The review wizard up to Decide, everything typed, Next not yet pressed."""
    open_task(page, server, task_id)
    page.get_by_role("link", name="Review this task").click()
    tick_all_checks(page)
    next_step(page)
    expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Decide")
    page.locator("input[name=outcome][value=FAILED]").check()
    page.fill("#id_result", RESULT)
    page.fill("#id_reason", REASON)
    page.fill("#id_evidence_ref", EVIDENCE)


def expect_the_decision_typed(page: Page) -> None:
    expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Decide")
    expect(page.locator("#id_reason")).to_have_value(REASON)
    expect(page.locator("#id_evidence_ref")).to_have_value(EVIDENCE)
    expect(page.locator("#id_result")).to_have_value(RESULT)
    expect(page.locator("input[name=outcome][value=FAILED]")).to_be_checked()


def sign_in_here(page: Page, person: TestPerson) -> None:
    """Sign in on the sign-in page the browser was sent to (its ``next`` stays)."""
    page.fill("#id_username", person.username)
    page.fill("#id_password", person.password)
    page.locator(".signin button[type=submit]").click()


def test_live_badges_say_signed_out_when_the_session_ends_and_offer_to_sign_in(
    page: Page, server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Issue 30: the badge still said "live" after the session had expired."""
    task_id = world["tasks"]["needs_review"]
    operator = people["operator"]
    sign_in(page, server, operator)
    open_task(page, server, task_id)
    badge = page.locator("#timeline-live")
    expect(badge).to_have_text("live")
    expect(page.locator("#session-note")).to_be_hidden()

    end_session(page.context)
    expect(badge).to_have_text("signed out")
    note = page.locator("#session-note")
    expect(note).to_be_visible()
    expect(note).to_contain_text("Your session has ended")
    expect(page.locator("#session-stay")).to_be_hidden()
    link = page.get_by_role("link", name="Sign in to continue where you left off")
    expect(link).to_have_attribute("href", f"/signin?next=/tasks/{task_id}")
    link.click()
    sign_in_here(page, operator)
    expect(page.locator("h1")).to_contain_text(task_id)
    expect(badge).to_have_text("live")


def test_a_wizard_step_sent_after_the_session_ended_comes_back_after_signing_in(
    page: Page,
    server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Issue 30: Next led to a bare sign-in page, and signing in restarted the wizard at Verify.
    Now the sign-in page says why, and the person is back on Decide with all they typed; the
    task that moved meanwhile is called out, as on any step."""
    task_id = world["tasks"]["needs_review"]
    operator = people["operator"]
    sign_in(page, server, operator)
    type_a_decision(page, server, task_id)
    end_session(page.context)
    next_step(page)

    expect(page.locator(".signin h1")).to_have_text("Sign in")
    expect(page.locator("#session-ended")).to_contain_text(
        "Your session ended; sign in to continue where you left off — nothing you typed is lost."
    )
    # Someone else decides meanwhile: the task moves to revision 4.
    assert review(api, world).status_code == 200
    sign_in_here(page, operator)

    expect_the_decision_typed(page)
    expect(page.get_by_text("The task changed while you were deciding.")).to_be_visible()
    expect(page.locator("main")).to_contain_text("You began at revision 3; it is now at revision 4")


def test_signing_in_from_a_wizard_steps_note_keeps_the_step(
    page: Page, server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The note's own link on a wizard step sends the step (nav=stay): nothing is lost, nothing
    moves."""
    task_id = world["tasks"]["needs_review"]
    operator = people["operator"]
    sign_in(page, server, operator)
    type_a_decision(page, server, task_id)
    end_session(page.context)
    link = page.get_by_role("link", name="Sign in to continue where you left off")
    expect(link).to_be_visible()
    link.click()
    expect(page.locator("#session-ended")).to_be_visible()
    sign_in_here(page, operator)
    expect_the_decision_typed(page)


def test_an_old_tab_refused_after_signing_in_elsewhere_keeps_its_step(
    page: Page, server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Signed in again in another tab (a new CSRF token), Next in the old tab is refused — and
    the refusal keeps the step and offers to continue where they left off."""
    task_id = world["tasks"]["needs_review"]
    operator = people["operator"]
    sign_in(page, server, operator)
    type_a_decision(page, server, task_id)
    end_session(page.context)
    other_tab = page.context.new_page()
    sign_in(other_tab, server, operator)
    other_tab.close()

    next_step(page)
    expect(page.locator("h1")).to_have_text("The form was not accepted")
    expect(page.locator("#draft-kept")).to_contain_text("Nothing you typed is lost")
    page.get_by_role("link", name="Continue where you left off").click()
    expect_the_decision_typed(page)


def test_a_supervisors_reason_typed_before_signing_in_again_is_still_in_its_field(
    page: Page, server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The client's safety net: on a page whose form was not sent (the note's link is a plain
    link there), what was typed is kept in the tab and filled back after signing in — for the
    same person only."""
    proposal = pending_retry(world, people["operator"])
    supervisor = people["supervisor"]
    reason = "The evidence reference points at last week's incident"
    sign_in(page, server, supervisor)
    page.goto(f"{server.url}/proposals/{proposal.id}")
    page.fill("#reject-reason", reason)
    end_session(page.context)
    page.get_by_role("link", name="Sign in to continue where you left off").click()
    sign_in_here(page, supervisor)
    expect(page.locator("#reject-reason")).to_have_value(reason)

    other = make_person(world, "supervisor")
    page.context.clear_cookies()
    sign_in(page, server, other)
    page.goto(f"{server.url}/proposals/{proposal.id}")
    expect(page.locator("#reject-reason")).to_have_value("")


def test_the_page_warns_before_the_idle_end_and_stay_signed_in_keeps_the_session(
    page: Page, idle_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Issue 30: the session expired without a word. Before its idle end the page
    says when it ends and offers "Stay signed in", which moves the end; left alone, the page
    then says the session has ended and every live badge says "signed out"."""
    operator = people["operator"]
    sign_in(page, idle_server, operator)
    open_task(page, idle_server, world["tasks"]["needs_review"])
    note = page.locator("#session-note")
    expect(note).to_be_hidden()
    expect(note).to_be_visible(timeout=IDLE_SECONDS * 1000)
    expect(note).to_contain_text("Your session ends at")
    before = Session.objects.get(session_key=session_key(page.context)).expire_date

    page.get_by_role("button", name="Stay signed in").click()
    expect(note).to_be_hidden()
    after = Session.objects.get(session_key=session_key(page.context)).expire_date
    assert after > before

    expect(note).to_contain_text("Your session has ended", timeout=2 * IDLE_SECONDS * 1000)
    expect(page.locator("#timeline-live")).to_have_text("signed out")
    expect(page.get_by_role("link", name="Sign in to continue where you left off")).to_be_visible()


@pytest.mark.parametrize("language", ["en", "zh-Hans"])
def test_the_session_pages_fit_a_phone_and_have_no_serious_accessibility_violation(
    page: Page,
    idle_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    language: str,
) -> None:
    """The every-page walk's checks (test_every_page.problems_of) on the new states: a page
    warning of its end, a page signed out, the sign-in page that says nothing is lost, and the
    refusal of an old tab that offers to continue."""
    operator = people["operator"]
    page.set_viewport_size(PHONE)
    page.context.set_extra_http_headers({"Accept-Language": language})
    problems: dict[str, list[str]] = {}
    sign_in(page, idle_server, operator)
    task_id = world["tasks"]["needs_review"]
    open_task(page, idle_server, task_id)
    note = page.locator("#session-note")
    expect(note).to_be_visible(timeout=IDLE_SECONDS * 1000)
    problems["warning"] = problems_of(page, language)
    expect(page.locator("#session-stay")).to_be_hidden(timeout=2 * IDLE_SECONDS * 1000)
    expect(page.locator("#timeline-live[data-state=signed-out]")).to_be_visible()
    problems["signed out"] = problems_of(page, language)

    sign_in(page, idle_server, operator)
    page.goto(f"{idle_server.url}/tasks/{task_id}/review")
    tick_all_checks(page)
    next_step(page)
    page.fill("#id_reason", REASON)
    other_tab = page.context.new_page()
    end_session(page.context)
    sign_in(other_tab, idle_server, operator)
    other_tab.close()
    next_step(page)
    expect(page.locator("#draft-kept")).to_be_visible()
    problems["refused, kept"] = problems_of(page, language)

    page.locator("#draft-resume").click()
    expect(page.locator("#id_reason")).to_have_value(REASON)
    end_session(page.context)
    next_step(page)
    expect(page.locator("#session-ended")).to_be_visible()
    problems["sign in, kept"] = problems_of(page, language)
    assert {k: v for k, v in problems.items() if v} == {}, json.dumps(
        problems, indent=1, ensure_ascii=False
    )
