"""An auditor in real Chromium (issue 6, Acceptance): filters the audit explorer, opens a task's
timeline from an entry and the platform's operation detail from there, exports CSV; no write
control is offered on any page visited, and every write URL answers 403.
"""

import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from orbit_console.decisions.models import ConsoleEvent, Submission
from tests.browser.conftest import sign_in
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

pytestmark = pytest.mark.browser

WRITE_CONTROLS = re.compile(
    r"^\s*(Review this task|Retry this task|Propose a review|Propose a retry"
    r"|Send the identical request again|Resend.*|Approve and send|Reject|Withdraw my proposal"
    r"|Submit the review|Submit the retry)\s*$",
    re.IGNORECASE,
)
REASON = "Checked the object store: the write never happened"


def history_step(page: Page, delta: int) -> None:
    """The browser's Back (-1) or Forward (1). Not ``page.go_back()``: the page loads itself
    again from the address on a history step (base.html's htmx-config), which aborts the
    navigation that Playwright waits for."""
    page.evaluate("delta => history.go(delta)", delta)
    page.wait_for_load_state("load")


def no_write_controls(page: Page) -> None:
    """Nothing on the page lets the person change anything: no decision links or buttons, and
    no form that posts anywhere but the language switch and signing out."""
    main = page.locator("main")
    expect(main.get_by_role("link", name=WRITE_CONTROLS)).to_have_count(0)
    expect(main.get_by_role("button", name=WRITE_CONTROLS)).to_have_count(0)
    for form in page.locator("form[method=post]").all():
        action = form.get_attribute("action") or ""
        assert action in ("/i18n/setlang/", "/signout", "/signout/everywhere"), (
            f"a write form on {page.url}: {action}"
        )
    for link in page.locator("main a[href]").all():
        href = link.get_attribute("href") or ""
        assert not re.search(r"/(review|retry|resend|approve|reject|withdraw)$", href), href


def test_auditor_filters_explores_and_exports_read_only(
    page: Page,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    history: dict[str, Any],
    tmp_path: Path,
) -> None:
    operator, auditor = people["operator"], people["auditor"]
    applied: Submission = history["applied"]
    task_id = world["tasks"]["needs_review"]
    expected = list(
        ConsoleEvent.objects.filter(actor=operator.user)
        .order_by("-created_at", "-id")
        .values_list("id", flat=True)
    )
    assert len(expected) == 5  # stored, sent, receipt; stored; proposed

    sign_in(page, orbit_server, auditor)
    page.locator("header").get_by_role("link", name="Audit").click()
    expect(page.locator("h1")).to_have_text("Audit explorer")
    expect(page.locator("#chain-status")).to_be_visible()
    no_write_controls(page)

    # Filter by person: exactly the operator's entries, newest first.
    page.fill("#id_person", operator.username)
    page.locator("form.filters button[type=submit]").click()
    rows = page.locator("#results tbody tr")
    expect(rows).to_have_count(len(expected))
    expect(page).to_have_url(re.compile(rf"person={operator.username}"))
    ids = [(row.get_attribute("id") or "")[len("event-") :] for row in rows.all()]
    assert ids == expected
    for index in range(len(expected)):
        expect(rows.nth(index)).to_contain_text(operator.username)

    # Narrow by action: the receipt alone.
    page.select_option("#id_kind", "submission.receipt")
    page.locator("form.filters button[type=submit]").click()
    expect(rows).to_have_count(1)
    receipt = rows.first
    expect(receipt).to_contain_text("Receipt received")
    expect(receipt.get_by_role("link", name="Applied")).to_be_visible()
    no_write_controls(page)

    # From the entry to the task's timeline, where the platform's own record of the review is.
    receipt.get_by_role("link", name=task_id[:8]).click()
    expect(page.locator("h1")).to_contain_text(task_id)
    expect(page).to_have_url(re.compile(rf"/tasks/{task_id}#timeline-title$"))
    expect(page.locator("#recovery-panel")).to_contain_text("read-only access")
    operation = page.locator(f"#entry-op-{applied.audit_id}")
    expect(operation).to_contain_text(REASON)
    no_write_controls(page)

    # ...and from the timeline to the operation detail: reason, evidence, before → after.
    operation.locator("summary").click()
    operation.get_by_role("link", name="Open the operation").click()
    expect(page).to_have_url(re.compile(rf"/tasks/{task_id}/operations/{applied.audit_id}$"))
    expect(page.locator("#operation-reason")).to_have_text(REASON)
    expect(page.locator("#operation-evidence")).to_have_text("evidence:reconciliation-001")
    state = page.locator("#operation-diff tr.changed", has=page.locator("th", has_text="state"))
    expect(state.first).to_contain_text("NEEDS_REVIEW")
    expect(state.first).to_contain_text("FAILED")
    no_write_controls(page)

    # The explorer's own link to the operation leads to the same page.
    page.go_back()
    page.go_back()
    expect(rows).to_have_count(1)
    page.locator("#results").get_by_role("link", name="platform operation").click()
    expect(page.locator("#operation-reason")).to_have_text(REASON)

    # Export the person's entries as CSV: the file holds exactly the filtered entries.
    page.go_back()
    page.select_option("#id_kind", "")
    page.locator("form.filters button[type=submit]").click()
    expect(rows).to_have_count(len(expected))
    exports_before = ConsoleEvent.objects.filter(kind="audit.exported", actor=auditor.user).count()
    with page.expect_download() as download_info:
        page.locator("#export-csv").click()
    download = download_info.value
    assert re.fullmatch(r"orbit-console-audit-\d{8}T\d{6}Z\.csv", download.suggested_filename)
    saved = tmp_path / download.suggested_filename
    download.save_as(saved)
    with saved.open(newline="", encoding="utf-8") as file:
        exported = list(csv.DictReader(file))
    assert [row["id"] for row in exported] == expected
    assert {row["actor"] for row in exported} == {operator.username}
    assert next(row for row in exported if row["kind"] == "submission.receipt")["audit_id"] == (
        applied.audit_id
    )
    recorded = ConsoleEvent.objects.filter(kind="audit.exported", actor=auditor.user)
    assert recorded.count() == exports_before + 1
    note = json.loads(recorded.order_by("-seq")[0].note)
    assert (note["format"], note["filter"]) == ("csv", {"person": operator.username})


def test_back_and_forward_in_the_explorer_bring_back_rows_and_filters_together(
    page: Page,
    orbit_server: DaphneServer,
    people: dict[str, TestPerson],
    history: dict[str, Any],
) -> None:
    """Issue 15: Back showed the previous rows under an empty filter form (and the browser
    reported a CSP violation). Each step of the history now shows its rows with the filter
    that chose them; the CSP watch of every browser test holds."""
    operator, auditor = people["operator"], people["auditor"]
    sign_in(page, orbit_server, auditor)
    page.goto(f"{orbit_server.url}/audit")
    rows = page.locator("#results tbody tr")
    page.fill("#id_person", operator.username)
    page.locator("form.filters button[type=submit]").click()
    expect(rows).to_have_count(5)
    page.select_option("#id_kind", "submission.receipt")
    page.locator("form.filters button[type=submit]").click()
    expect(rows).to_have_count(1)

    history_step(page, -1)
    expect(page).not_to_have_url(re.compile(r"kind=submission"))
    expect(rows).to_have_count(5)
    expect(page.locator("#id_person")).to_have_value(operator.username)
    expect(page.locator("#id_kind")).to_have_value("")

    history_step(page, 1)
    expect(rows).to_have_count(1)
    expect(page.locator("#id_kind")).to_have_value("submission.receipt")
    expect(page.locator("#id_person")).to_have_value(operator.username)

    history_step(page, -1)
    expect(rows).to_have_count(5)  # this step is done before the next one is taken
    history_step(page, -1)
    expect(page).to_have_url(f"{orbit_server.url}/audit")
    expect(page.locator("#id_person")).to_have_value("")


def test_auditor_sees_no_write_control_and_every_write_url_is_403(
    page: Page,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    history: dict[str, Any],
) -> None:
    sign_in(page, orbit_server, people["auditor"])
    pending: Submission = history["pending"]
    proposal = history["proposal"]
    base = orbit_server.url

    for path in (
        "/",
        *(f"/tasks/{task_id}" for task_id in world["tasks"].values()),
        f"/submissions/{history['applied'].id}",
        f"/submissions/{pending.id}",
        f"/proposals/{proposal.id}",
    ):
        response = page.goto(base + path)
        assert response is not None and response.status == 200, path
        no_write_controls(page)
    expect(page.locator("#proposal-state")).to_contain_text("Waiting for approval")

    for path in (
        f"/tasks/{world['tasks']['needs_review']}/review",
        f"/tasks/{world['tasks']['failed']}/retry",
    ):
        response = page.goto(base + path)
        assert response is not None and response.status == 403, path

    # Crafted POSTs with the session's own cookies and CSRF token.
    page.goto(base + "/")
    token = page.locator("input[name=csrfmiddlewaretoken]").first.get_attribute("value") or ""
    for path, fields in (
        (f"/tasks/{world['tasks']['needs_review']}/review", {"step": "confirm", "nav": "submit"}),
        (f"/tasks/{world['tasks']['failed']}/retry", {"step": "confirm", "nav": "submit"}),
        (f"/submissions/{pending.id}/resend", {}),
        (f"/proposals/{proposal.id}/approve", {"note": "fine"}),
        (f"/proposals/{proposal.id}/reject", {"reason": "no"}),
        (f"/proposals/{proposal.id}/withdraw", {}),
    ):
        answer = page.request.post(
            base + path,
            form={"csrfmiddlewaretoken": token, **fields},
            headers={"Referer": base + "/"},
            max_redirects=0,
        )
        assert answer.status == 403, f"{path}: {answer.status}"
    assert Submission.objects.get(id=pending.id).send_count == 0
    proposal.refresh_from_db()
    assert proposal.state == "pending"


def test_the_explorer_shows_the_why_of_each_decision_and_notes_in_words(
    page: Page,
    orbit_server: DaphneServer,
    people: dict[str, TestPerson],
    history: dict[str, Any],
) -> None:
    """Issue 30: the explorer had no reason, evidence, outcome or body, and an export's note
    was raw JSON; an auditor had to open every submission."""
    operator, auditor = people["operator"], people["auditor"]
    applied: Submission = history["applied"]
    sign_in(page, orbit_server, auditor)
    page.goto(f"{orbit_server.url}/audit?person={operator.username}&kind=submission.receipt")
    receipt = page.locator("#results tbody tr").first
    decision = receipt.locator(".entry-decision")
    expect(decision).to_contain_text(REASON)
    expect(decision).to_contain_text("evidence:reconciliation-001")
    expect(decision.locator(".decided-outcome")).to_have_text("FAILED")
    decision.locator("summary").click()
    expect(decision.locator("pre")).to_have_text(applied.body)

    with page.expect_download():
        page.locator("#export-csv").click()
    page.goto(f"{orbit_server.url}/audit?person={auditor.username}&kind=audit.exported")
    note = page.locator("#results tbody tr").first.locator(".entry-note")
    expect(note).to_contain_text("CSV export")
    expect(note).to_contain_text(f"filter: kind = submission.receipt, person = {operator.username}")
    expect(note).not_to_contain_text("{")


def test_a_wrong_filter_is_named_and_the_explorer_asks_no_command_of_its_reader(
    page: Page,
    orbit_server: DaphneServer,
    people: dict[str, TestPerson],
    history: dict[str, Any],
) -> None:
    """Issue 30: a task filter of "XYZ-not-hex" answered "No entry matches" (the field's error
    was never swapped in), and the explorer told a person in a browser to run
    ``manage.py audit verify``."""
    sign_in(page, orbit_server, people["auditor"])
    page.goto(f"{orbit_server.url}/audit")
    expect(page.locator("main")).not_to_contain_text("manage.py")
    page.fill("#id_task_id", "XYZ-not-hex")
    page.locator("form.filters button[type=submit]").click()
    errors = page.locator("#filter-errors")
    expect(errors).to_contain_text("Nothing was searched")
    expect(errors).to_contain_text("Task id: A task id, or its first characters: lowercase")
    expect(page.locator("#results")).not_to_contain_text("No entry matches")
