"""A batch in real Chromium (issue 16): an operator filters the work queue, selects every task
matching it, decides and proposes; a supervisor in a second browser approves; the operator's
page follows the progress live to the end, its work queue and a task's timeline, open in other
tabs, show the items as they land, and the outcomes export.

The worker runs where the deployment runs it (decisions/batchworker.py ``sends_here``): with the
in-memory channel layer (the embedded default, the demo) inside the console's server process;
with Redis in a real ``manage.py reconcile`` process on the same database."""

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
from django.conf import settings
from playwright.sync_api import Page, expect

from orbit_console.decisions.models import Batch, BatchItem, ItemOutcome
from orbit_console.ledger.models import OperationAudit
from orbit_console.ledger.seed import seed_incident
from orbit_console.ops.workers import shares_channel_layer
from tests.approvals.conftest import APPROVALS_ON, serve
from tests.approvals.test_proposals import batch_step, propose_batch
from tests.browser.conftest import mark, not_reloaded, sign_in
from tests.browser.test_approvals import crew, open_live_queue  # noqa: F401
from tests.console.web import signed_in
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer, child_env

pytestmark = pytest.mark.browser

COUNT = 30  # more than the work queue's page of 25: "all matching" must take every page


# Slow enough to watch: the 30 items land over a second and a half.
PACE = {"CONSOLE_BATCH_RATE": "20", "CONSOLE_BATCH_WORKER": "auto"}


@pytest.fixture(scope="module")
def batch_console(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """API and console with approval required, the batch worker placed as deployed."""
    yield from serve("browser-batches", django_db_blocker, **PACE)


@pytest.fixture
def worker(batch_console: DaphneServer) -> Iterator[subprocess.Popen[bytes] | None]:
    """With a shared channel layer, the reconciler sends; otherwise the server does."""
    if not shares_channel_layer():
        yield None
        return
    process = subprocess.Popen(
        [sys.executable, "manage.py", "reconcile", "--interval", "0.5"],
        cwd=settings.BASE_DIR,
        env=child_env(**APPROVALS_ON, **PACE),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    yield process
    process.terminate()
    process.wait(timeout=30)


def tick_checklist(page: Page) -> None:
    """The verify step's checklist, every box ticked: the decide step opens."""
    for box in page.locator("#verify-form input[type=checkbox]").all():
        box.check()
    page.locator("#verify-form button[type=submit]").click()
    expect(page.locator("#decide")).to_be_visible()


def test_filter_select_all_propose_approve_watch_live_export(
    page: Page,
    other_page: Any,
    batch_console: DaphneServer,
    crew: dict[str, TestPerson],  # noqa: F811
    world: dict[str, Any],
    worker: subprocess.Popen[bytes] | None,
) -> None:
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=COUNT, label="outage"
    )
    server = batch_console
    sign_in(page, server, crew["operator"])
    page.goto(f"{server.url}/?business_key_prefix=outage:")
    expect(page.locator("#results tbody tr")).to_have_count(25)
    page.check("input[name=scope][value=all]")
    expect(page.locator("#matching-count")).to_contain_text(f"{COUNT} to review")  # counted first
    page.locator("#batch-form button[value=review]").click()

    expect(page.locator("#eligible-count")).to_contain_text(f"{COUNT} tasks are eligible")
    tick_checklist(page)
    page.check("input[name=outcome][value=FAILED]")
    page.fill("#id_result", '{"lost": "{{business_key}}"}')
    page.check("input[name=template]")
    page.fill("#id_reason", "Broker outage INC-12: none of these reached the store")
    page.fill("#id_evidence_ref", "https://status.example/INC-12")
    page.locator("form[action$=decide] button[type=submit]").click()
    expect(page.locator("#example-body")).to_contain_text('"lost": "outage:')
    page.fill("#id_count", str(COUNT))
    page.check("input[name=confirm]")
    page.get_by_role("button", name="Propose for approval").click()
    expect(page.locator("#approval")).to_be_visible()
    batch_url = page.url
    batch_path = batch_url.removeprefix(server.url)

    # Before approval the operator opens, in other tabs, the work queue of the incident and the
    # timeline of one of its tasks; then none of the three pages is loaded again.
    queue = page.context.new_page()
    queue.goto(f"{server.url}/?business_key_prefix=outage:")
    expect(queue.locator("#queue-live")).to_have_text("live")
    first = incident[0]
    timeline = page.context.new_page()
    timeline.goto(f"{server.url}/tasks/{first}")
    expect(timeline.locator("#timeline-live")).to_have_text("live")
    expect(page.locator(".live-line .flag.live")).to_have_text("live")
    for watched in (page, queue, timeline):
        mark(watched)
    expect(page.locator("#batch-state")).to_have_text("Waiting for approval")

    supervisor = other_page()
    sign_in(supervisor, server, crew["supervisor"])
    supervisor.goto(f"{server.url}/approvals")  # the batch waits there, one proposal
    supervisor.locator(f"#proposal-rows tr[id^=batch-] a[href='{batch_path}']").click()
    expect(supervisor).to_have_url(batch_url)
    expect(supervisor.locator("#eligible-count")).to_contain_text(f"{COUNT} tasks")
    supervisor.get_by_role("button", name=f"Approve and send {COUNT} decisions").click()
    expect(supervisor.locator("#batch-progress")).to_be_visible()

    expect(page.locator("#batch-state")).to_have_text("Finished", timeout=90_000)
    # Issue 30: one truth on the page: the header no longer says "Waiting for approval".
    expect(page.locator("h1 + p")).not_to_contain_text("Waiting for approval")
    expect(page.locator("[data-outcome=applied]")).to_have_text(str(COUNT))
    # The step pills came live with the progress (issue 30): every step done, none current.
    expect(page.locator("#batch-steps li.done")).to_have_count(5)
    expect(page.locator("#batch-steps li[aria-current=step]")).to_have_count(0)
    expect(page.get_by_role("button", name="Pause")).to_be_hidden()  # the controls went live
    visible_rows = queue.locator("#results tbody tr .row-live:has-text('now FAILED')")
    expect(visible_rows).to_have_count(25)  # every row on the page said its task moved
    platform = timeline.locator("#timeline-entries > li.source-platform")
    expect(platform.filter(has_text="Broker outage INC-12")).to_have_count(1)  # the review
    expect(timeline.locator(f"#timeline-entries a[href='{batch_path}']").first).to_be_visible()
    for watched in (page, queue, timeline):
        assert not_reloaded(watched)  # it all came live

    with page.expect_download() as download:
        page.get_by_role("link", name="CSV").click()
    text = download.value.path().read_text(encoding="utf-8")
    assert text.count("\n") == COUNT + 1 and text.count(",applied,") == COUNT

    batch = Batch.objects.get(id=batch_url.rstrip("/").rsplit("/", 1)[1])
    assert batch.sent_as_id == crew["supervisor"].user.pk
    assert BatchItem.objects.filter(batch=batch, outcome=ItemOutcome.APPLIED).count() == COUNT
    for task_id in incident:
        assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1


@pytest.fixture(scope="module")
def two_approvers_console(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    yield from serve("browser-two-approvers", django_db_blocker, CONSOLE_REVIEW_APPROVERS="2")


def test_a_batchs_first_of_two_approvals_is_counted_live_on_another_supervisors_queue(
    page: Page,
    two_approvers_console: DaphneServer,
    crew: dict[str, TestPerson],  # noqa: F811
    world: dict[str, Any],
) -> None:
    """Issue 29: an approval that is not the last one needed comes to the queue live, and its
    row, already shown, takes the new count (its data-live-version moved) without a reload."""
    server = two_approvers_console
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2, label="two-live"
    )
    open_live_queue(page, server, crew["supervisor_2"])
    with signed_in(server.url, crew["operator"]) as operator:
        batch_id = propose_batch(operator, incident)
    row = page.locator(f"#batch-{batch_id}")
    expect(row).to_contain_text("0 of 2 approvals")
    with signed_in(server.url, crew["supervisor"]) as first:
        batch_step(first, batch_id, "approve")
    expect(row).to_contain_text("1 of 2 approvals")
    expect(page.locator(f"#proposal-rows tr#batch-{batch_id}")).to_have_count(1)
    assert not_reloaded(page)


# --- Issue 30: a batch looks and behaves like the single wizard ---------------------------------


def current_step(page: Page) -> Any:
    return page.locator("#batch-steps li[aria-current=step]")


def test_a_batch_walks_the_wizards_steps_and_a_mistake_keeps_what_was_typed(
    page: Page,
    batch_console: DaphneServer,
    crew: dict[str, TestPerson],  # noqa: F811
    world: dict[str, Any],
) -> None:
    """Step pills, primary buttons, the verify checklist before Decide; a wrong count is told at
    its field, focused, with the count and the tick kept and the page not sent to its top;
    before approval nothing is called settled or on its way; its author discards it."""
    seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=3, label="walk"
    )
    server = batch_console
    sign_in(page, server, crew["operator"])
    page.goto(f"{server.url}/?business_key_prefix=walk:")
    for box in page.locator("#results tbody input[name=task]").all():
        box.check()
    review = page.locator("#batch-form button[value=review]")
    expect(review).to_have_class("primary")
    review.click()

    expect(current_step(page)).to_have_text("Verify")
    expect(page.locator("#decide")).to_have_count(0)  # no decision before the checklist
    next_button = page.locator("#verify-form button[type=submit]")
    expect(next_button).to_have_class("primary")
    tick_checklist(page)
    expect(current_step(page)).to_have_text("Decide")
    expect(page.locator("#batch-steps li.done")).to_have_text(["Verify"])
    page.check("input[name=outcome][value=FAILED]")
    page.fill("#id_result", '{"lost": true}')
    page.fill("#id_reason", "Broker outage INC-30: none of these reached the store")
    page.fill("#id_evidence_ref", "https://status.example/INC-30")
    decide = page.locator("form[action$=decide] button[type=submit]")
    expect(decide).to_have_class("primary")
    decide.click()
    expect(current_step(page)).to_have_text("Confirm")

    count = page.locator("#id_count")
    assert count.evaluate("e => getComputedStyle(e).borderRadius") != "0px"  # styled
    count.fill("5")
    page.check("#id_confirm")
    page.get_by_role("button", name="Propose for approval").click()
    error = page.locator("#id_count_error")
    expect(error).to_have_text("Type the number of tasks to be sent: 3.")
    expect(count).to_have_value("5")  # nothing typed is cleared
    expect(page.locator("#id_confirm")).to_be_checked()  # nor ticked
    expect(count).to_be_focused()
    expect(count).to_have_attribute("aria-describedby", "id_count_helptext id_count_error")
    assert page.evaluate("window.scrollY") > 0  # not sent to the top of the page
    expect(count).to_be_in_viewport()

    count.fill("3")
    page.get_by_role("button", name="Propose for approval").click()
    expect(page.locator("#batch-state")).to_have_text("Waiting for approval")
    expect(current_step(page)).to_have_text("Approval")
    progress = page.locator("#batch-progress")
    expect(progress).to_contain_text("Nothing is sent before it is approved: then 3 tasks")
    expect(progress).not_to_contain_text("settled")
    expect(progress).not_to_contain_text("On their way")

    page.get_by_role("button", name="Discard this batch").click()
    expect(page.locator("#batch-discarded")).to_contain_text("nothing of this batch was sent")
    expect(current_step(page)).to_have_count(0)
    expect(page.get_by_role("button", name="Discard this batch")).to_have_count(0)


@pytest.fixture(scope="module")
def small_limit_console(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    yield from serve("browser-batch-limit", django_db_blocker, CONSOLE_BATCH_MAX_TASKS="2")


def test_the_batch_bar_offers_only_the_batches_a_filter_can_make(
    page: Page,
    small_limit_console: DaphneServer,
    crew: dict[str, TestPerson],  # noqa: F811
    world: dict[str, Any],
) -> None:
    """Over the limit no batch button is offered, nor a retry for a NEEDS_REVIEW filter: the
    reason is shown instead; the ticked rows get every button back."""
    seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=3, label="limit"
    )
    server = small_limit_console
    sign_in(page, server, crew["operator"])
    page.goto(f"{server.url}/?state=NEEDS_REVIEW&business_key_prefix=limit:")
    buttons = page.locator("#batch-buttons")
    expect(buttons.locator("button")).to_have_count(2)
    page.check("input[name=scope][value=all]")
    expect(page.locator("#matching-count")).to_contain_text("more than 2 to review")
    expect(buttons.locator("button")).to_have_count(0)
    expect(buttons.locator("[data-not-offered=review]")).to_contain_text(
        "a batch holds at most 2 tasks"
    )
    expect(buttons.locator("[data-not-offered=retry]")).to_contain_text(
        "no task matching this filter can be retried"
    )
    page.check("input[name=scope][value=ticked]")
    expect(buttons.locator("button")).to_have_count(2)
