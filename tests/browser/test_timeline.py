"""The live audit timeline in real Chromium (issue 4, Acceptance): two browsers on one task
page, a review in one (or straight through the API) appears in the other without a reload, a
reconnect after missed entries catches up, and no entry is ever shown twice."""

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect

from orbit_console.decisions.submissions import submission_create
from orbit_console.lib.rfc3339 import parse_utc
from orbit_console.timeline.builder import CATCH_UP_PAGES, PAGE_SIZE
from tests.browser.conftest import (
    BrowserWatch,
    open_task,
    review_records,
    review_to_confirm,
    sign_in,
    submit_decision,
)
from tests.support.orbit import REVIEW_REVISION, retry, review, review_body
from tests.support.people import TestPerson, make_person, make_reader
from tests.support.servers import DaphneServer
from tests.timeline.helpers import add_operations

pytestmark = pytest.mark.browser

ENTRIES = "#timeline-entries > li[id^=entry-]"
RECONNECT_TIMEOUT_MS = 60_000  # full-jitter backoff after a few failed attempts: up to ~30 s


@pytest.fixture
def second_page(browser: Browser, browser_watch: BrowserWatch) -> Iterator[Page]:
    """A page in a context of its own (a second browser: its own cookies and session)."""
    context: BrowserContext = browser.new_context()
    page = context.new_page()
    browser_watch.attach(page)
    yield page
    context.close()


@pytest.fixture
def viewer_server(django_db_blocker: Any, orbit_server: DaphneServer) -> Iterator[DaphneServer]:
    """A console of its own for a viewer, to be stopped and started again by the test."""
    with django_db_blocker.unblock():
        server = DaphneServer("timeline-viewer").start()
    yield server
    server.stop()


def open_live_timeline(page: Page, server: DaphneServer, person: TestPerson, task_id: str) -> None:
    sign_in(page, server, person)
    open_task(page, server, task_id)
    expect(page.locator("#timeline-live")).to_have_text("live")


def mark_page(page: Page) -> None:
    """Leave a mark in the page's JavaScript state: a reload would wipe it."""
    page.evaluate("window.__timelineMark = 'not reloaded'")


def assert_not_reloaded(page: Page) -> None:
    assert page.evaluate("window.__timelineMark") == "not reloaded"


def entry_ids(page: Page) -> list[str]:
    ids: list[str] = page.locator(ENTRIES).evaluate_all("items => items.map(item => item.id)")
    return ids


def assert_no_duplicates(page: Page) -> None:
    ids = entry_ids(page)
    assert ids, "the timeline shows no entry"
    assert len(ids) == len(set(ids)), f"duplicate entries: {ids}"


def assert_newest_first(page: Page) -> None:
    """By the times the entries show, not by the sort keys the page itself sorts with."""
    times: list[str] = page.locator(ENTRIES).evaluate_all(
        "items => items.map(item => item.querySelector('time[datetime]').getAttribute('datetime'))"
    )
    instants = [parse_utc(time) for time in times]
    assert instants == sorted(instants, reverse=True), times


def api_review(api: httpx.Client, world: dict[str, Any], task: str) -> str:
    response = review(api, world, task)
    assert response.status_code == 200, response.text
    audit_id: str = response.json()["data"]["audit_id"]
    return audit_id


# --- Two browsers on one task page ------------------------------------------------------------


def test_review_through_the_wizard_appears_live_in_another_browser(
    page: Page,
    second_page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """AU2: a supervisor (who also audits) reviews in one browser; the auditor's open page
    shows the platform's new entry and the console's events without a reload, once each."""
    task_id = world["tasks"]["needs_review"]
    reviewer = make_person(world, "supervisor", "auditor")
    open_live_timeline(page, orbit_server, people["auditor"], task_id)
    mark_page(page)
    expect(page.locator("#task-changed")).to_be_hidden()

    sign_in(second_page, orbit_server, reviewer)
    review_to_confirm(second_page, orbit_server, task_id, reason="Checked <the store> & more")
    submit_decision(second_page, "execution_settled")
    expect(second_page.locator("#receipt h2")).to_have_text("Applied")

    [record] = review_records(api, world, task_id)
    entry = page.locator(f"#entry-op-{record['id']}")
    expect(entry).to_be_visible()
    expect(entry).to_contain_text("Reviewed")
    expect(entry).to_contain_text("Checked <the store> & more")  # shown as text, escaped
    expect(entry).to_contain_text(reviewer.username)  # AU6: the console knows the actor
    expect(page.locator("#task-changed")).to_be_visible()
    # The console's own events of the submission arrived too (stored, then its outcome).
    expect(page.locator("#timeline-entries > li.source-console").first).to_be_visible()
    assert_not_reloaded(page)
    assert_no_duplicates(page)
    assert_newest_first(page)


def test_review_through_the_api_appears_in_both_browsers_once(
    page: Page,
    second_page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Any client of the recovery API changes the task: both open pages show it live, once,
    on top, and say the task has changed since they were loaded."""
    task_id = world["tasks"]["needs_review"]
    open_live_timeline(page, orbit_server, people["auditor"], task_id)
    open_live_timeline(second_page, orbit_server, make_person(world, "auditor"), task_id)
    for viewer in (page, second_page):
        mark_page(viewer)
    before = len(entry_ids(page))

    audit_id = api_review(api, world, "needs_review")

    for viewer in (page, second_page):
        expect(viewer.locator(f"#entry-op-{audit_id}")).to_be_visible()
        expect(viewer.locator(ENTRIES).first).to_have_id(f"entry-op-{audit_id}")
        expect(viewer.locator("#task-changed")).to_be_visible()
        expect(viewer.locator(f"#entry-op-{audit_id}")).to_have_count(1)
        assert_not_reloaded(viewer)
        assert_no_duplicates(viewer)
    assert len(entry_ids(page)) == before + 1


def test_the_recovery_panel_follows_the_task_live_for_a_supervisor(
    page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Issue 15: a supervisor's open task page kept offering "Propose a review" after the task
    was decided. The supervisor's page has the live timeline now, and when the task moves the
    recovery panel asks again and offers only what is still possible."""
    task_id = world["tasks"]["needs_review"]
    open_live_timeline(page, orbit_server, people["supervisor"], task_id)
    mark_page(page)
    panel = page.locator("#recovery-panel")
    expect(panel.get_by_role("link", name="Review this task")).to_be_visible()

    audit_id = api_review(api, world, "needs_review")

    expect(page.locator(f"#entry-op-{audit_id}")).to_be_visible()
    expect(panel.get_by_role("link", name="Review this task")).to_have_count(0)
    expect(panel).to_contain_text("Review unavailable")
    expect(page.locator("#recovery-state")).to_contain_text("at revision 4")
    assert_not_reloaded(page)


def test_the_wizard_warns_live_when_the_pinned_revision_moves(
    page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Issue 15: an operator deciding a task worked from a snapshot. The wizard now follows
    the task and says at once that someone else moved it."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, orbit_server, people["operator"])
    page.goto(f"{orbit_server.url}/tasks/{task_id}/review")
    expect(page.locator("#page-live")).to_have_text("live")
    mark_page(page)
    warning = page.locator("#task-changed")
    expect(warning).to_be_hidden()

    api_review(api, world, "needs_review")

    expect(warning).to_be_visible()
    expect(warning).to_contain_text("revision 3 will be refused")
    assert_not_reloaded(page)


def test_work_queue_rows_say_live_that_their_task_moved(
    page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Issue 15: the work queue kept listing a task that was already decided, with no marker."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, orbit_server, people["operator"])
    expect(page.locator("#queue-live")).to_have_text("live")
    mark_page(page)
    marker = page.locator(f"#row-live-{task_id}")
    expect(marker).to_be_empty()

    api_review(api, world, "needs_review")

    expect(marker).to_contain_text("now FAILED, revision 4")
    assert_not_reloaded(page)


def test_a_submission_page_left_open_shows_the_receipt_when_it_comes(
    page: Page,
    second_page: Page,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Issue 15: pages about a decision follow it. One tab shows a stored decision not yet
    answered; the person sends it from another tab; the first says "Applied" by itself."""
    operator = people["operator"]
    stored = submission_create(
        action="review",
        task_id=world["tasks"]["needs_review"],
        queue_id=world["queue_id"],
        namespace_id=world["namespace_id"],
        expected_revision=REVIEW_REVISION,
        body=json.dumps(review_body()),
        created_by=operator.user,
    ).submission
    address = f"{orbit_server.url}/submissions/{stored.id}"
    sign_in(page, orbit_server, operator)
    page.goto(address)
    expect(page.locator("#live-state h2").first).to_have_text("Stored, not yet answered")
    expect(page.locator("#page-live")).to_have_text("live")
    mark_page(page)

    sign_in(second_page, orbit_server, operator)
    second_page.goto(address)
    second_page.get_by_role("button", name="Send the identical request again").click()
    expect(second_page.locator("#receipt-audit-id")).not_to_be_empty()

    expect(page.locator("#receipt-audit-id")).to_have_text(
        second_page.locator("#receipt-audit-id").text_content() or ""
    )
    assert_not_reloaded(page)


# --- Reconnecting -------------------------------------------------------------------------------


def test_reconnect_catches_up_with_an_entry_missed_while_the_server_was_down(
    page: Page,
    viewer_server: DaphneServer,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """The channel layer delivers at most once and the ws extension replays nothing: after
    reconnecting, the page fetches what it missed, shows it exactly once, and keeps
    receiving live entries."""
    task_id = world["tasks"]["needs_review"]
    port = viewer_server.port
    open_live_timeline(page, viewer_server, people["auditor"], task_id)
    mark_page(page)

    viewer_server.stop()
    expect(page.locator("#timeline-live")).not_to_have_text("live")
    missed = api_review(api, world, "needs_review")
    viewer_server.start()
    assert viewer_server.port == port

    missed_entry = page.locator(f"#entry-op-{missed}")
    expect(missed_entry).to_be_visible(timeout=RECONNECT_TIMEOUT_MS)
    expect(page.locator("#timeline-live")).to_have_text("live")
    expect(missed_entry).to_have_count(1)
    expect(page.locator("#task-changed")).to_be_visible()
    assert_not_reloaded(page)

    # Live again: the next change of the task (made through V's own API, whose process
    # announces it even without a shared channel layer) is pushed; the missed one stays once.
    with httpx.Client(base_url=viewer_server.url, timeout=30) as viewer_api:
        retried = retry(viewer_api, world, "needs_review", revision="4")
    assert retried.status_code == 201, retried.text
    expect(page.locator(f"#entry-op-{retried.json()['data']['audit_id']}")).to_be_visible()
    expect(missed_entry).to_have_count(1)
    assert_not_reloaded(page)
    assert_no_duplicates(page)
    assert_newest_first(page)


def test_reconnect_after_missing_more_than_a_catch_up_starts_the_timeline_over(
    page: Page,
    viewer_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """More was missed than a catch-up fetches: rather than keep a gap, the page shows the
    newest page and an "Older" control that pages on from there, without a reload."""
    task_id = world["tasks"]["needs_review"]
    open_live_timeline(page, viewer_server, people["auditor"], task_id)
    mark_page(page)
    shown_before = entry_ids(page)

    viewer_server.stop()
    expect(page.locator("#timeline-live")).not_to_have_text("live")
    missed = add_operations(task_id, PAGE_SIZE * CATCH_UP_PAGES + 1)
    viewer_server.start()

    newest = page.locator(f"#entry-op-{missed[-1]}")
    expect(newest).to_be_visible(timeout=RECONNECT_TIMEOUT_MS)
    newest_page = [f"entry-op-{audit_id}" for audit_id in reversed(missed[-PAGE_SIZE:])]
    expect(page.locator(ENTRIES)).to_have_count(len(newest_page))
    assert [item for item in entry_ids(page) if item.startswith("entry-op-")] == newest_page
    assert not set(shown_before) & set(entry_ids(page))
    expect(page.locator("#task-changed")).to_be_visible()

    page.locator("#timeline-older a").click()
    expect(page.locator(f"#entry-op-{missed[-PAGE_SIZE - 1]}")).to_be_visible()
    assert_not_reloaded(page)
    assert_no_duplicates(page)
    assert_newest_first(page)


# --- Who sees the platform's operations -----------------------------------------------------------


def test_without_audit_read_the_page_says_operations_are_not_shown_and_opens_no_socket(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], live_db: None
) -> None:
    """AU1: without tasks:audit:read (a token issued elsewhere; the roles imply it) the page
    says so rather than showing an empty list, and it does not try to open the live socket."""
    sign_in(page, orbit_server, make_reader(world, "operator"))
    open_task(page, orbit_server, world["tasks"]["needs_review"])
    timeline = page.locator("section.timeline-section")
    expect(timeline).to_contain_text("the platform's operations on this task are not shown")
    # Only the header's notifications menu listens (issue 32); nothing of the timeline does.
    expect(page.locator("[ws-connect]")).to_have_count(1)
    expect(page.locator("header [ws-connect='/ws/notifications']")).to_have_count(1)
    expect(page.locator("#timeline-live")).to_have_count(0)
    expect(page.locator("#timeline-entries > li.source-platform")).to_have_count(0)


@pytest.fixture
def server_without_its_channel_layer(
    django_db_blocker: Any, orbit_server: DaphneServer
) -> Iterator[DaphneServer]:
    """A console whose Redis cannot be reached: pages work, live updates cannot."""
    with django_db_blocker.unblock():
        server = DaphneServer(
            "timeline-no-redis", env={"REDIS_URL": "redis://127.0.0.1:1/0"}
        ).start()
    yield server
    server.stop()


def test_the_page_says_live_updates_are_paused_and_keeps_trying_while_redis_is_down(
    page: Page,
    server_without_its_channel_layer: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Issue 14: the socket closes with 4503 (not an HTTP 500 to the handshake); the page says
    so, in words, and opens a new socket after a pause, again and again."""
    sockets: list[str] = []
    page.on("websocket", lambda socket: sockets.append(socket.url))
    sign_in(page, server_without_its_channel_layer, people["auditor"])
    open_task(page, server_without_its_channel_layer, world["tasks"]["needs_review"])
    badge = page.locator("#timeline-live")
    expect(badge).to_have_text("live updates paused, retrying…")
    expect(badge).to_have_attribute("data-state", "paused")
    # The first socket, then two more after pauses of at most 2 s and 4 s.
    deadline = time.monotonic() + 30
    while len(sockets) < 3:
        assert time.monotonic() < deadline, sockets
        page.wait_for_timeout(250)
    expect(badge).to_have_text("live updates paused, retrying…")
