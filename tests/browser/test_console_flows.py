"""The console in real Chromium against real daphne servers (issue 3, Acceptance).

``orbit_server`` serves the recovery API and the console, whose calls to its own API go over
HTTP; ``proxied_console`` is a second console whose calls go through ``faulty_proxy``, which
can refuse a write or lose its answer after the API committed it.
"""

import json
import re
from typing import Any

import httpx
import pytest
from playwright.sync_api import Page, expect

from orbit_console.decisions.models import Submission
from orbit_console.decisions.submissions import submission_create
from orbit_console.ledger.lifecycle import (
    RetryPolicy,
    actor_id_for,
    attempt_finish,
    attempt_start,
    task_accept,
)
from orbit_console.ledger.models import AttemptOutcome, OperationAudit, Queue
from tests.browser.conftest import (
    BrowserWatch,
    confirmed_body,
    next_step,
    open_task,
    retry_to_confirm,
    review_records,
    review_to_confirm,
    sign_in,
    submit_decision,
    tick_all_checks,
)
from tests.support.orbit import get_task, review, review_body
from tests.support.people import TestPerson
from tests.support.proxy import FaultyProxy
from tests.support.servers import LOG_DIR, DaphneServer

pytestmark = pytest.mark.browser

CURRENT_STEP = "ol.steps [aria-current=step]"


def _field(page: Page, control: str) -> Any:
    """The ``.field`` wrapper of one form control: where its inline errors are shown."""
    return page.locator(".field", has=page.locator(control))


def _task_json(api: httpx.Client, world: dict[str, Any], task_id: str) -> dict[str, Any]:
    response = get_task(api, task_id, world["tokens"]["admin"])
    assert response.status_code == 200, response.text
    task: dict[str, Any] = response.json()["data"]
    return task


# --- Sign-in --------------------------------------------------------------------------------


def test_sign_in_refuses_a_wrong_password_and_keeps_the_user_name(
    page: Page, orbit_server: DaphneServer, people: dict[str, TestPerson]
) -> None:
    operator = people["operator"]
    page.goto(f"{orbit_server.url}/signin")
    page.fill("#id_username", operator.username)
    page.fill("#id_password", operator.password + "-wrong")
    page.locator(".signin button[type=submit]").click()

    expect(page.locator(".signin [role=alert]")).to_contain_text("correct username and password")
    expect(page.locator("#id_username")).to_have_value(operator.username)
    expect(page.locator("header .who")).to_have_count(0)


def test_sign_in_with_the_right_password_lands_on_the_work_queue(
    page: Page, orbit_server: DaphneServer, people: dict[str, TestPerson]
) -> None:
    operator = people["operator"]
    sign_in(page, orbit_server, operator)

    expect(page).to_have_url(f"{orbit_server.url}/")
    expect(page.locator("h1")).to_have_text("Work queue")
    expect(page.locator("header .who")).to_contain_text(operator.username)


def test_an_anonymous_visitor_is_sent_to_sign_in(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any]
) -> None:
    page.goto(f"{orbit_server.url}/tasks/{world['tasks']['needs_review']}")
    expect(page).to_have_url(re.compile(r"/signin\?next="))
    expect(page.locator(".signin h1")).to_have_text("Sign in")


# --- A full review and a full retry ---------------------------------------------------------


def test_a_full_review_through_the_wizard_ends_in_a_receipt(
    page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """RV1-RV5, C9: verify → decide → confirm shows the exact body; the receipt names the
    platform's audit record; the task page then shows the new state."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, orbit_server, people["operator"])
    review_to_confirm(page, orbit_server, task_id)

    body = confirmed_body(page)
    assert body == {
        "expected_revision": "3",
        "reason": "Checked the object store: the write never happened",
        "evidence_ref": "evidence:reconciliation-001",
        "execution_settled": True,
        "outcome": "FAILED",
        "result": {"confirmed": True, "sequence": 9007199254740993},
    }
    # I8: the big number is shown exactly as typed, not rounded to a double.
    expect(page.locator("#request-body")).to_contain_text("9007199254740993")

    submit_decision(page, "execution_settled")
    expect(page.locator("#receipt h2")).to_have_text("Applied")
    records = review_records(api, world, task_id)
    assert len(records) == 1
    expect(page.locator("#receipt-audit-id")).to_have_text(records[0]["id"])
    expect(page.locator("#receipt-deduplicated")).to_contain_text("no")
    # What was shown on the confirm step is what was stored and sent.
    stored = Submission.objects.get(task_id=task_id)
    stored_body = page.locator("section[aria-labelledby=request-title] pre")
    assert stored_body.text_content() == stored.body
    LOG_DIR.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(LOG_DIR / "browser-review-receipt.png"), full_page=True)

    page.locator("h1 a").click()
    expect(page.locator("h1 .state")).to_have_text("FAILED")
    expect(page.locator("main")).to_contain_text("Revision 4")
    expect(page.locator("main")).to_contain_text("Review unavailable")
    assert _task_json(api, world, task_id)["state"] == "FAILED"


def test_a_full_retry_through_the_wizard_ends_at_the_new_task(
    page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """RT1-RT5: the receipt links the new task, whose page says it is a manual retry of the
    source; the source then names its successor."""
    source = world["tasks"]["failed"]
    sign_in(page, orbit_server, people["operator"])
    retry_to_confirm(page, orbit_server, source, budget="5", unit="min")

    assert confirmed_body(page) == {
        "expected_revision": "3",
        "reason": "The earlier execution has ended; running it again is safe",
        "evidence_ref": "evidence:safe-retry-001",
        "safe_to_retry": True,
        "task_timeout_ms": 300000,
    }
    submit_decision(page, "safe_to_retry")

    expect(page.locator("#receipt h2")).to_have_text("Applied")
    # Issue 30: the receipt follows the task and its new one, with one "live" badge for both.
    expect(page.locator(".flag.live")).to_have_count(1)
    expect(page.locator(".flag.live")).to_have_text("live")
    new_task_link = page.locator("#receipt-new-task")
    expect(new_task_link).to_have_text(re.compile(r"^[0-9a-f]{32}$"))
    new_task = new_task_link.text_content() or ""
    assert new_task != source
    new_task_link.click()

    expect(page.locator("h1")).to_contain_text(new_task)
    chain = page.locator("nav.callout")
    expect(chain).to_contain_text("manual retry of")
    expect(chain.get_by_role("link", name=source)).to_be_visible()
    assert _task_json(api, world, source)["retry_successor_id"] == new_task

    chain.get_by_role("link", name=source).click()
    expect(page.locator("nav.callout")).to_contain_text("retried as")
    expect(page.locator("main")).to_contain_text("already has a retry successor")


# --- Validation ------------------------------------------------------------------------------


def test_review_validation_errors_are_inline_and_keep_what_was_typed(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """C10: each step explains its errors next to the field; nothing typed is lost."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, orbit_server, people["operator"])
    open_task(page, orbit_server, task_id)
    page.get_by_role("link", name="Review this task").click()

    # Verify: a box left unticked is named, the ticked ones stay ticked.
    boxes = page.locator("main form input[type=checkbox]")
    for index in range(boxes.count() - 1):
        boxes.nth(index).check()
    next_step(page)
    expect(page.locator(CURRENT_STEP)).to_have_text("Verify")
    expect(_field(page, "#id_checked_lease").locator(".errorlist")).to_contain_text("required")
    expect(page.locator("#id_checked_history")).to_be_checked()
    expect(page.locator("#id_checked_lease")).not_to_be_checked()
    tick_all_checks(page)
    next_step(page)

    # Decide: invalid JSON, a blank reason and an evidence reference with a space.
    expect(page.locator(CURRENT_STEP)).to_have_text("Decide")
    page.locator("input[name=outcome][value=SUCCEEDED]").check()
    page.fill("#id_result", '{"confirmed": tru')
    page.fill("#id_reason", "   ")
    page.fill("#id_evidence_ref", "evidence: with a space")
    next_step(page)

    expect(page.locator(CURRENT_STEP)).to_have_text("Decide")
    expect(_field(page, "#id_result").locator(".errorlist")).to_contain_text("not valid JSON")
    expect(_field(page, "#id_reason").locator(".errorlist")).to_contain_text("blank")
    expect(_field(page, "#id_evidence_ref").locator(".errorlist")).to_contain_text("whitespace")
    expect(page.locator("input[name=outcome][value=SUCCEEDED]")).to_be_checked()
    expect(page.locator("#id_result")).to_have_value('{"confirmed": tru')
    expect(page.locator("#id_reason")).to_have_value("   ")
    expect(page.locator("#id_evidence_ref")).to_have_value("evidence: with a space")

    # null is JSON but not a result; the fixed fields keep their values.
    page.fill("#id_result", "null")
    page.fill("#id_reason", "The object store shows the write")
    page.fill("#id_evidence_ref", "evidence:store-audit-7")
    next_step(page)
    expect(_field(page, "#id_result").locator(".errorlist")).to_contain_text("must not be null")
    expect(_field(page, "#id_reason").locator(".errorlist")).to_have_count(0)
    expect(page.locator("#id_reason")).to_have_value("The object store shows the write")
    expect(page.locator("#id_evidence_ref")).to_have_value("evidence:store-audit-7")

    page.fill("#id_result", '{"confirmed": true}')
    next_step(page)

    # Confirm: without the explicit confirmation nothing is sent; the body stays on screen.
    expect(page.locator(CURRENT_STEP)).to_have_text("Confirm")
    page.locator("button[name=nav][value=submit]").click()
    expect(page.locator(CURRENT_STEP)).to_have_text("Confirm")
    expect(_field(page, "#id_execution_settled").locator(".errorlist")).to_contain_text("required")
    assert confirmed_body(page) == {
        "expected_revision": "3",
        "reason": "The object store shows the write",
        "evidence_ref": "evidence:store-audit-7",
        "execution_settled": True,
        "outcome": "SUCCEEDED",
        "result": {"confirmed": True},
    }
    assert not Submission.objects.filter(task_id=task_id).exists()


def test_enter_goes_forward_and_focus_lands_where_the_person_must_look(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Issue 15: Enter in a wizard field pressed "Back" (the form's first button). Enter now
    goes forward; after a failed step the keyboard is on the first field to fix, after a move on
    the new step's heading; and each field's help text is the one its aria-describedby names."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, orbit_server, people["operator"])
    open_task(page, orbit_server, task_id)
    page.get_by_role("link", name="Review this task").click()
    tick_all_checks(page)
    next_step(page)
    expect(page.locator(CURRENT_STEP)).to_have_text("Decide")
    expect(page.locator("#step-title")).to_be_focused()

    # Enter in the last field, with the result not yet valid JSON: the same step again (not the
    # one before), the keyboard on the result.
    page.locator("input[name=outcome][value=FAILED]").check()
    page.fill("#id_result", '{"confirmed": tru')
    page.fill("#id_reason", "Checked the object store: the write never happened")
    page.fill("#id_evidence_ref", "evidence:reconciliation-001")
    page.locator("#id_evidence_ref").press("Enter")
    expect(_field(page, "#id_result").locator(".errorlist")).to_contain_text("not valid JSON")
    expect(page.locator(CURRENT_STEP)).to_have_text("Decide")
    expect(page.locator("#id_result")).to_be_focused()

    page.fill("#id_result", '{"confirmed": true}')
    page.locator("#id_evidence_ref").press("Enter")
    expect(page.locator(CURRENT_STEP)).to_have_text("Confirm")
    expect(page.locator("#step-title")).to_be_focused()
    # Back is still there, first on screen.
    back = page.locator("button[name=nav][value=back]").bounding_box()
    submit = page.locator("button[name=nav][value=submit]").bounding_box()
    assert back is not None and submit is not None and back["x"] < submit["x"]

    page.locator("button[name=nav][value=back]").click()
    expect(page.locator(CURRENT_STEP)).to_have_text("Decide")
    described = page.locator("main form [aria-describedby]").all()
    assert described, "no field of the decide step names its help text"
    for field in described:
        for described_by in (field.get_attribute("aria-describedby") or "").split():
            expect(page.locator(f"#{described_by}")).to_have_count(1)


def test_a_long_paste_is_never_cut_and_a_live_counter_says_how_much_is_too_much(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Issue 15: a 10 000-character paste into the reason was cut to 1 024 without a word (the
    field's maxlength). Nothing is cut now: a live counter says how much is left or too much,
    and the server refuses the overlong reason with its count (C10)."""
    sign_in(page, orbit_server, people["operator"])
    open_task(page, orbit_server, world["tasks"]["needs_review"])
    page.get_by_role("link", name="Review this task").click()
    tick_all_checks(page)
    next_step(page)
    counter = page.locator("#id_reason_counter")
    expect(counter).to_have_text("0 of 1024 characters")
    page.fill("#id_reason", "checked")
    expect(counter).to_have_text("7 of 1024 characters")

    page.fill("#id_reason", "x" * 10_000)
    expect(page.locator("#id_reason")).to_have_value("x" * 10_000)
    expect(counter).to_contain_text("8976 characters too many: nothing was cut")
    expect(counter).to_have_class(re.compile(r"\bover\b"))
    page.locator("input[name=outcome][value=FAILED]").check()
    page.fill("#id_result", '{"confirmed": true}')
    page.fill("#id_evidence_ref", "evidence:reconciliation-001")
    next_step(page)
    expect(page.locator(CURRENT_STEP)).to_have_text("Decide")
    expect(_field(page, "#id_reason").locator(".errorlist")).to_contain_text("it has 10000")
    expect(page.locator("#id_reason")).to_have_value("x" * 10_000)


def test_retry_validation_errors_are_inline_and_keep_what_was_typed(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """RT3: the budget must cover the frozen attempt timeout (10 s in the seed); the start
    window must lie in the future."""
    task_id = world["tasks"]["failed"]
    sign_in(page, orbit_server, people["operator"])
    open_task(page, orbit_server, task_id)
    page.get_by_role("link", name="Retry this task").click()
    tick_all_checks(page)
    next_step(page)

    expect(page.locator(CURRENT_STEP)).to_have_text("Decide")
    page.fill("#id_reason", "Safe: the object was never written")
    page.fill("#id_evidence_ref", "evidence:store-audit-8")
    page.fill("#id_budget_value", "5")
    page.select_option("#id_budget_unit", "s")
    page.fill("#id_start_deadline_at", "2001-01-01T00:00:00")
    next_step(page)

    expect(page.locator(CURRENT_STEP)).to_have_text("Decide")
    expect(_field(page, "#id_budget_value").locator(".errorlist")).to_contain_text(
        "at least the attempt timeout (10 s)"
    )
    expect(_field(page, "#id_start_deadline_at").locator(".errorlist")).to_contain_text(
        "in the future"
    )
    expect(page.locator("#id_reason")).to_have_value("Safe: the object was never written")
    expect(page.locator("#id_evidence_ref")).to_have_value("evidence:store-audit-8")
    expect(page.locator("#id_budget_value")).to_have_value("5")
    expect(page.locator("#id_budget_unit")).to_have_value("s")

    page.fill("#id_budget_value", "31")
    page.select_option("#id_budget_unit", "d")
    page.fill("#id_start_deadline_at", "")
    next_step(page)
    expect(_field(page, "#id_budget_value").locator(".errorlist")).to_contain_text("30 days")

    page.fill("#id_budget_value", "10")
    page.select_option("#id_budget_unit", "s")
    next_step(page)
    expect(page.locator(CURRENT_STEP)).to_have_text("Confirm")
    assert confirmed_body(page)["task_timeout_ms"] == 10000


# --- Conflicts and unknown outcomes --------------------------------------------------------


def test_a_stale_revision_is_rejected_with_the_current_state_beside_it(
    page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """RV3, C5: someone else reviewed first; the console shows the 409 STATE_CONFLICT and the
    task's current revision, and nothing more is recorded."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, orbit_server, people["operator"])
    review_to_confirm(page, orbit_server, task_id, outcome="SUCCEEDED")

    first = review(api, world, outcome="SUCCEEDED")
    assert first.status_code == 200, first.text
    current = _task_json(api, world, task_id)
    assert current["revision"] != "3"

    submit_decision(page, "execution_settled")
    expect(page.locator(".callout.danger h2")).to_have_text("Rejected")
    expect(page.locator(".callout.danger")).to_contain_text("STATE_CONFLICT")
    expect(page.locator("#current-revision")).to_have_text(current["revision"])
    expect(page.locator("#current-task")).to_contain_text(current["state"])
    expect(page.get_by_role("button", name="Send the identical request again")).to_have_count(0)
    assert len(review_records(api, world, task_id)) == 1
    assert Submission.objects.get(task_id=task_id).state == "rejected"


def test_an_unreachable_api_is_an_unknown_outcome_reconciled_by_resending(
    page: Page,
    proxied_console: DaphneServer,
    faulty_proxy: FaultyProxy,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """C9, I1: the write never reached the API; resending the identical request applies it
    once."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, proxied_console, people["operator"])
    review_to_confirm(page, proxied_console, task_id)

    faulty_proxy.set_mode("refuse_writes")
    submit_decision(page, "execution_settled")
    expect(page.locator(".callout.warning h2")).to_have_text("Outcome unknown")
    assert review_records(api, world, task_id) == []
    submission = Submission.objects.get(task_id=task_id)
    assert submission.state == "unknown"

    faulty_proxy.set_mode("pass")
    page.get_by_role("button", name="Send the identical request again").click()
    expect(page.locator("#receipt h2")).to_have_text("Applied")
    records = review_records(api, world, task_id)
    assert len(records) == 1
    expect(page.locator("#receipt-audit-id")).to_have_text(records[0]["id"])
    expect(page.locator("#receipt-deduplicated")).to_contain_text("no")
    expect(page.get_by_role("button", name="Send the identical request again")).to_have_count(0)
    resent = Submission.objects.get(id=submission.id)
    assert (resent.idempotency_key, resent.body) == (submission.idempotency_key, submission.body)
    assert resent.send_count == 2


def test_a_lost_answer_is_an_unknown_outcome_reconciled_to_the_original_receipt(
    page: Page,
    proxied_console: DaphneServer,
    faulty_proxy: FaultyProxy,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """C8, C9, I1: the API committed but its answer was lost; the resend gets the original
    receipt (deduplicated) with the same audit id, and the audit keeps one record."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, proxied_console, people["operator"])
    review_to_confirm(page, proxied_console, task_id)

    faulty_proxy.set_mode("drop_writes")
    submit_decision(page, "execution_settled")
    expect(page.locator(".callout.warning h2")).to_have_text("Outcome unknown")
    records = review_records(api, world, task_id)
    assert len(records) == 1  # the platform applied it; only the answer was lost
    assert Submission.objects.get(task_id=task_id).audit_id == ""

    faulty_proxy.set_mode("pass")
    page.get_by_role("button", name="Send the identical request again").click()
    expect(page.locator("#receipt h2")).to_have_text("Applied")
    expect(page.locator("#receipt-deduplicated")).to_contain_text("yes")
    expect(page.locator("#receipt-audit-id")).to_have_text(records[0]["id"])
    assert review_records(api, world, task_id) == records
    assert Submission.objects.get(task_id=task_id).audit_id == records[0]["id"]


# --- Who is offered what ---------------------------------------------------------------------


def test_an_auditor_is_never_offered_a_recovery_button(
    page: Page,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Auditors hold no tasks:review / tasks:retry: no wizard links, no resend button, and the
    wizard itself refuses them."""
    pending = submission_create(
        action="review",
        task_id=world["tasks"]["needs_review"],
        expected_revision="3",
        body=json.dumps(review_body()),
        created_by=people["operator"].user,
    ).submission
    sign_in(page, orbit_server, people["auditor"])

    for task in ("needs_review", "failed"):
        open_task(page, orbit_server, world["tasks"][task])
        expect(page.locator("#actions-title")).to_be_visible()
        expect(page.get_by_text("You have read-only access")).to_be_visible()
        expect(page.get_by_role("link", name="Review this task")).to_have_count(0)
        expect(page.get_by_role("link", name="Retry this task")).to_have_count(0)

    page.goto(f"{orbit_server.url}/submissions/{pending.id}")
    expect(page.locator(".callout.warning h2")).to_have_text("Stored, not yet answered")
    expect(page.get_by_role("button", name="Send the identical request again")).to_have_count(0)

    response = page.goto(f"{orbit_server.url}/tasks/{world['tasks']['needs_review']}/review")
    assert response is not None and response.status == 403


def test_an_operator_is_told_why_a_succeeded_task_cannot_be_retried(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """RT1: a SUCCEEDED task is never retried; the page says so instead of offering it."""
    sign_in(page, orbit_server, people["operator"])
    open_task(page, orbit_server, world["tasks"]["succeeded"])

    expect(page.get_by_role("link", name="Retry this task")).to_have_count(0)
    expect(page.get_by_role("link", name="Review this task")).to_have_count(0)
    for heading, reason in (
        ("Retry unavailable", "A SUCCEEDED task can never be retried."),
        ("Review unavailable", "Only a task in NEEDS_REVIEW can be reviewed"),
    ):
        title = page.get_by_role("heading", name=heading)
        expect(title).to_be_visible()
        expect(title.locator("xpath=following-sibling::ul[1]")).to_contain_text(reason)


# --- One decision, one submission -------------------------------------------------------------


def test_a_double_click_on_submit_makes_one_submission(
    page: Page,
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """C9, I6: two clicks on the final button post one decision and one audit record."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, orbit_server, people["operator"])
    review_to_confirm(page, orbit_server, task_id)
    page.check("#id_execution_settled")
    page.locator("button[name=nav][value=submit]").dblclick()

    expect(page.locator("#receipt h2")).to_have_text("Applied")
    assert Submission.objects.filter(task_id=task_id).count() == 1
    assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1
    assert len(review_records(api, world, task_id)) == 1


def test_two_tabs_submitting_the_same_decision_make_one_submission(
    page: Page,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """I6: the second tab, past any browser-side guard, lands on the first submission; its
    different decision is said plainly not to have been sent, beside the one that stands."""
    task_id = world["tasks"]["needs_review"]
    sign_in(page, orbit_server, people["operator"])
    review_to_confirm(page, orbit_server, task_id)
    second = page.context.new_page()
    review_to_confirm(second, orbit_server, task_id, outcome="SUCCEEDED")

    submit_decision(page, "execution_settled")
    expect(page.locator("#receipt h2")).to_have_text("Applied")
    submit_decision(second, "execution_settled")
    expect(second.locator("#set-aside")).to_contain_text("Your decision was not sent")
    # Issue 30: the decision that stands is this person's own (another tab): "You", not a name.
    expect(second.locator("#set-aside")).to_contain_text("You had already made a decision")
    expect(second.locator("#set-aside")).not_to_contain_text(people["operator"].username)
    expect(second.locator("#set-aside-mine")).to_contain_text('"outcome": "SUCCEEDED"')
    expect(second.locator("#set-aside-standing")).to_contain_text('"outcome": "FAILED"')
    expect(second).to_have_url(page.url)

    assert Submission.objects.filter(task_id=task_id).count() == 1
    assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1
    second.close()


# --- Safety of the pages ----------------------------------------------------------------------

XSS_REASON = '<img src=x onerror="window.__xss=1">'
XSS_EVIDENCE = "evidence:<svg/onload=window.__xss=3>"
XSS_RESULT = '{"x": "<script>window.__xss=2</script>"}'
XSS_PAYLOAD = '{"note":"<img src=y onerror=\\"window.__xss=4\\">"}'


def _needs_review_task_with_payload(world: dict[str, Any], payload: str) -> str:
    queue = Queue.objects.get(id=world["queue_id"])
    task = task_accept(
        queue=queue,
        actor_id=actor_id_for(world["namespace_id"], "submitter"),
        handler="object.prepare",
        payload=payload,
        business_key="object:xss",
        retry=RetryPolicy(max_attempts=1, attempt_timeout_ms=10_000),
    )
    attempt_start(task=task, worker_id="worker-1")
    worker = actor_id_for(world["namespace_id"], "worker-1")
    parked = attempt_finish(task=task, worker_actor_id=worker, outcome=AttemptOutcome.UNKNOWN)
    task_id: str = parked.id
    return task_id


def _assert_inert(page: Page) -> None:
    assert page.evaluate("typeof window.__xss") == "undefined"
    assert page.locator("img[src=x], img[src=y], svg[onload]").count() == 0
    assert page.locator("script:not([src])").count() == 0


def test_xss_in_reason_evidence_payload_and_result_renders_as_text(
    page: Page,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Markup typed into the wizard or stored in a task is shown as text, never run."""
    task_id = _needs_review_task_with_payload(world, XSS_PAYLOAD)
    sign_in(page, orbit_server, people["operator"])
    open_task(page, orbit_server, task_id)
    expect(page.locator("#payload-title + pre")).to_contain_text('<img src=y onerror=\\"')
    _assert_inert(page)

    review_to_confirm(
        page,
        orbit_server,
        task_id,
        outcome="SUCCEEDED",
        result=XSS_RESULT,
        reason=XSS_REASON,
        evidence_ref=XSS_EVIDENCE,
    )
    body = confirmed_body(page)
    assert body["reason"] == XSS_REASON
    assert body["evidence_ref"] == XSS_EVIDENCE
    assert body["result"] == {"x": "<script>window.__xss=2</script>"}
    expect(page.locator("#request-body")).to_contain_text("<script>window.__xss=2</script>")
    _assert_inert(page)

    submit_decision(page, "execution_settled")
    expect(page.locator("#receipt h2")).to_have_text("Applied")
    stored_body = page.locator("section[aria-labelledby=request-title] pre")
    expect(stored_body).to_contain_text("<img src=x onerror=")
    expect(stored_body).to_contain_text("<script>window.__xss=2</script>")
    _assert_inert(page)

    page.locator("h1 a").click()
    expect(page.locator("#result-title + pre")).to_contain_text("<script>window.__xss=2</script>")
    _assert_inert(page)


def test_pages_raise_no_content_security_policy_violation(
    page: Page,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    browser_watch: BrowserWatch,
) -> None:
    """Strict CSP: no inline script or style anywhere on the pages people visit."""
    page.goto(f"{orbit_server.url}/signin")
    sign_in(page, orbit_server, people["operator"])
    open_task(page, orbit_server, world["tasks"]["needs_review"])
    page.get_by_role("link", name="Review this task").click()
    tick_all_checks(page)
    next_step(page)
    expect(page.locator(CURRENT_STEP)).to_have_text("Decide")
    open_task(page, orbit_server, world["tasks"]["failed"])
    page.get_by_role("link", name="Retry this task").click()
    expect(page.locator(CURRENT_STEP)).to_have_text("Verify")
    page.goto(f"{orbit_server.url}/?state=FAILED")
    expect(page.locator("h1")).to_have_text("Work queue")
    page.goto(f"{orbit_server.url}/tasks/{'0' * 32}")
    expect(page.locator("h1")).to_have_text("Not found")

    assert browser_watch.csp_violations() == []
    assert browser_watch.page_errors == []


# --- Languages --------------------------------------------------------------------------------


def test_the_language_switch_changes_the_page_language_and_back(
    page: Page, orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    sign_in(page, orbit_server, people["operator"])
    task_url = f"{orbit_server.url}/tasks/{world['tasks']['needs_review']}"
    page.goto(task_url)
    expect(page.locator("html")).to_have_attribute("lang", "en")

    page.select_option("#language-select", label="简体中文")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")
    expect(page).to_have_url(task_url)
    expect(page.locator("#language-select")).to_have_value("zh-hans")
    expect(page.locator("#language-select option:checked")).to_have_text("简体中文")

    page.goto(f"{orbit_server.url}/")
    expect(page.locator("html")).to_have_attribute("lang", "zh-hans")

    page.select_option("#language-select", "en")
    expect(page.locator("html")).to_have_attribute("lang", "en")
    expect(page.locator("#language-select")).to_have_value("en")
    expect(page.locator("h1")).to_have_text("Work queue")
