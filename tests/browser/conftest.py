"""Helpers for the browser tests: signing in, walking the wizards, and watching the console.

Every page a test opens is watched: a Content Security Policy violation or an uncaught script
error on any of them fails the test at teardown (strict CSP, no inline scripts or styles).
"""

import json
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone
from playwright.sync_api import (
    Browser,
    BrowserContext,
    BrowserType,
    ConsoleMessage,
    Page,
    Playwright,
    expect,
    sync_playwright,
)

from orbit_console.decisions.models import FollowUp, Submission, SubmissionState
from orbit_console.decisions.proposals import proposal_create
from orbit_console.decisions.submissions import submission_create
from tests.console.web import review_through_console, signed_in
from tests.support.orbit import (
    CANCELLED_REVISION,
    RETRY_REVISION,
    REVIEW_REVISION,
    bearer,
    review_body,
)
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

# Two cores, several suites at once, servers that start on demand: be patient.
ACTION_TIMEOUT_MS = 30_000
EXPECT_TIMEOUT_MS = 20_000


# --- Playwright lives for one module at a time ---------------------------------------------------
#
# pytest-playwright starts Playwright once per session. Its synchronous API runs an event loop
# in the test process's main thread for as long as it lives, and under xdist a worker runs
# browser modules and other modules in turn: every later test that calls ``asyncio.run`` (the
# Channels and stream tests do) would fail with "cannot be called from a running event loop".
# These overrides start Playwright and Chromium per browser module and stop them after it.


@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as started:
        yield started


@pytest.fixture(scope="module")
def browser_type(playwright: Playwright, browser_name: str) -> BrowserType:
    chosen: BrowserType = getattr(playwright, browser_name)
    return chosen


@pytest.fixture(scope="module")
def launch_browser(
    browser_type_launch_args: dict[str, Any], browser_type: BrowserType
) -> Callable[..., Browser]:
    def launch(**kwargs: Any) -> Browser:
        return browser_type.launch(**{**browser_type_launch_args, **kwargs})

    return launch


@pytest.fixture(scope="module")
def browser(launch_browser: Callable[..., Browser]) -> Iterator[Browser]:
    launched = launch_browser()
    yield launched
    launched.close()


@pytest.fixture(scope="module")
def browser_context_args(device: str | None, playwright: Playwright) -> dict[str, Any]:
    """No base URL, video or tracing here: the tests open their own servers' URLs."""
    return dict(playwright.devices[device]) if device else {}


class BrowserWatch:
    """What the browser reported on every page of one context."""

    def __init__(self) -> None:
        self.console: list[str] = []
        self.page_errors: list[str] = []

    def attach(self, page: Page) -> None:
        page.set_default_timeout(ACTION_TIMEOUT_MS)
        page.set_default_navigation_timeout(ACTION_TIMEOUT_MS)
        page.on("console", self._on_console)
        page.on("pageerror", lambda error: self.page_errors.append(str(error)))

    def _on_console(self, message: ConsoleMessage) -> None:
        self.console.append(f"{message.type}: {message.text}")

    def csp_violations(self) -> list[str]:
        return [text for text in self.console if "content security policy" in text.lower()]


@pytest.fixture(autouse=True)
def browser_watch(context: BrowserContext, page: Page) -> Iterator[BrowserWatch]:
    """Watch every page of the test's context (also the tabs a test opens itself)."""
    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    watch = BrowserWatch()
    context.on("page", watch.attach)
    watch.attach(page)
    yield watch
    assert watch.csp_violations() == [], "the browser reported CSP violations"
    assert watch.page_errors == [], "a script on a page failed"


@pytest.fixture
def other_page(browser: Browser, browser_watch: BrowserWatch) -> Iterator[Callable[[], Page]]:
    """Open pages in browser contexts of their own (one person each), watched like ``page``."""
    contexts: list[BrowserContext] = []

    def open_page() -> Page:
        context = browser.new_context()
        contexts.append(context)
        new = context.new_page()
        browser_watch.attach(new)
        return new

    yield open_page
    for context in contexts:
        context.close()


def mark(page: Page) -> None:
    """Mark the page's window: ``not_reloaded`` tells whether it is still the same document."""
    page.evaluate("window.orbitNotReloaded = true")


def not_reloaded(page: Page) -> bool:
    return bool(page.evaluate("window.orbitNotReloaded === true"))


def sign_in(page: Page, server: DaphneServer, person: TestPerson) -> None:
    """Sign in through the form and wait for the work queue."""
    page.goto(f"{server.url}/signin")
    page.fill("#id_username", person.username)
    page.fill("#id_password", person.password)
    # The header's language form has a submit button too: use the sign-in form's own.
    page.locator(".signin button[type=submit]").click()
    expect(page.locator("header .who")).to_contain_text(person.username)


def open_task(page: Page, server: DaphneServer, task_id: str) -> None:
    page.goto(f"{server.url}/tasks/{task_id}")
    expect(page.locator("h1")).to_contain_text(task_id)


def next_step(page: Page) -> None:
    page.locator("button[name=nav][value=next]").click()


def tick_all_checks(page: Page) -> None:
    """Tick every box of the wizard's checklist step."""
    boxes = page.locator("main form input[type=checkbox]")
    expect(boxes.first).to_be_visible()
    for index in range(boxes.count()):
        boxes.nth(index).check()


def review_to_confirm(
    page: Page,
    server: DaphneServer,
    task_id: str,
    *,
    outcome: str = "FAILED",
    result: str = '{"confirmed": true, "sequence": 9007199254740993}',
    reason: str = "Checked the object store: the write never happened",
    evidence_ref: str = "evidence:reconciliation-001",
    link: str = "Review this task",
) -> None:
    """Walk the review wizard from the task page to its confirm step (verify → decide); an
    operator who must propose follows the link "Propose a review"."""
    open_task(page, server, task_id)
    page.get_by_role("link", name=link).click()
    expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Verify")
    tick_all_checks(page)
    next_step(page)
    expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Decide")
    page.locator(f"input[name=outcome][value={outcome}]").check()
    page.fill("#id_result", result)
    page.fill("#id_reason", reason)
    page.fill("#id_evidence_ref", evidence_ref)
    next_step(page)
    expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Confirm")


def retry_to_confirm(
    page: Page,
    server: DaphneServer,
    task_id: str,
    *,
    reason: str = "The earlier execution has ended; running it again is safe",
    evidence_ref: str = "evidence:safe-retry-001",
    budget: str = "5",
    unit: str = "min",
) -> None:
    """Walk the retry wizard from the task page to its confirm step (verify → decide)."""
    open_task(page, server, task_id)
    page.get_by_role("link", name="Retry this task").click()
    expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Verify")
    tick_all_checks(page)
    next_step(page)
    expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Decide")
    page.fill("#id_reason", reason)
    page.fill("#id_evidence_ref", evidence_ref)
    page.fill("#id_budget_value", budget)
    page.select_option("#id_budget_unit", unit)
    next_step(page)
    expect(page.locator("ol.steps [aria-current=step]")).to_have_text("Confirm")


def confirmed_body(page: Page) -> dict[str, Any]:
    """The exact JSON body the confirm step says it will post."""
    text = page.locator("#request-body").text_content() or ""
    body: dict[str, Any] = json.loads(text)
    return body


def submit_decision(page: Page, confirmation: str) -> None:
    """Tick the explicit confirmation (``execution_settled`` / ``safe_to_retry``) and submit."""
    page.check(f"#id_{confirmation}")
    page.locator("button[name=nav][value=submit]").click()


def task_operations(api: httpx.Client, world: dict[str, Any], task_id: str) -> list[Any]:
    """The platform's audit records of a task (AU2), read with the admin token."""
    response = api.get(f"/v1/tasks/{task_id}/operations", headers=bearer(world["tokens"]["admin"]))
    assert response.status_code == 200, response.text
    items: list[Any] = response.json()["data"]["items"]
    return items


def review_records(api: httpx.Client, world: dict[str, Any], task_id: str) -> list[Any]:
    """The task's ``task.review`` audit records (AU6)."""
    records = task_operations(api, world, task_id)
    return [item for item in records if item["action"] == "task.review"]


@pytest.fixture
def history(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> dict[str, Any]:
    """An operator's applied review (through the console), an open submission and a pending
    proposal of theirs: entries of every kind an auditor looks at."""
    operator = people["operator"]
    with signed_in(orbit_server.url, operator) as console:
        applied_id, _ = review_through_console(console, world["tasks"]["needs_review"])
    pending = submission_create(
        action="review",
        task_id=world["tasks"]["needs_review_2"],
        queue_id=world["queue_id"],
        expected_revision=REVIEW_REVISION,
        body=json.dumps(review_body()),
        created_by=operator.user,
    ).submission
    proposal = proposal_create(
        action="retry",
        task_id=world["tasks"]["failed"],
        queue_id=world["queue_id"],
        expected_revision=RETRY_REVISION,
        body="{}",
        proposed_by=operator.user,
    ).proposal
    return {
        "applied": Submission.objects.get(id=applied_id),
        "pending": pending,
        "proposal": proposal,
    }


def retried_until_it_ended(world: dict[str, Any], operator: TestPerson, state: str) -> str:
    """The seeded CANCELLED task, retried through the console, its new task followed until it
    ended in ``state``: the new task's id (the console's record, as the follow-up leaves it)."""
    successor = world["tasks"]["succeeded"]
    submission = submission_create(
        action="retry",
        task_id=world["tasks"]["cancelled"],
        queue_id=world["queue_id"],
        expected_revision=CANCELLED_REVISION,
        body="{}",
        created_by=operator.user,
    ).submission
    now = timezone.now()
    Submission.objects.filter(id=submission.id).update(
        state=SubmissionState.SUCCEEDED, result_task_id=successor, resolved_at=now
    )
    FollowUp.objects.create(
        submission_id=submission.id,
        task_id=successor,
        namespace_id=world["namespace_id"],
        state=state,
        revision=3,
        seen_at=now,
        ended_at=now,
        deadline=now + timedelta(hours=1),
    )
    return successor
