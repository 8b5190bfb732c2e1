"""The batch pages over real HTTP (issue 16, docs/bulk.md): select in the work queue, verify,
decide, confirm, watch the outcome and export it; refusals change nothing."""

import csv
import html
import io
import json
from typing import Any

import httpx
from asgiref.sync import async_to_sync

from orbit_console.decisions.batchworker import work_batches
from orbit_console.decisions.models import (
    Batch,
    BatchItem,
    BatchState,
    ConsoleEvent,
    ItemOutcome,
)
from orbit_console.ledger.models import OperationAudit
from orbit_console.ledger.seed import seed_incident
from tests.console.web import Console, element, signed_in, text_of
from tests.decisions.test_batches import needs_review_tasks
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer

REVIEW = {
    "outcome": "FAILED",
    "result": '{"lost":"{{business_key}}"}',
    "reason": "broker outage INC-9: nothing was written",
    "evidence_ref": "https://status.example/INC-9",
    "template": "on",
}


def run_worker() -> None:
    while async_to_sync(work_batches)():
        pass
    async_to_sync(work_batches)()


def send(console: Console, path: str, data: dict[str, Any]) -> httpx.Response:
    """POST a form as the browser would: its CSRF token, repeated fields for lists."""
    pairs = [("csrfmiddlewaretoken", console.csrf_token())]
    for name, value in data.items():
        pairs.extend((name, v) for v in (value if isinstance(value, list) else [value]))
    return console.post(path, pairs)


CHECKLIST = {
    "review": ["checked_sample", "checked_left_out", "checked_external", "checked_lease"],
    "retry": ["checked_sample", "checked_left_out", "checked_external", "checked_business_key"],
}


def verify(console: Console, batch: Batch) -> httpx.Response:
    """The verify step's checklist, every box ticked."""
    ticked = dict.fromkeys(CHECKLIST[batch.action], "on")
    return send(console, f"/batches/{batch.id}/verify", ticked)


def new_batch(
    console: Console, *, verified: bool = True, **data: Any
) -> tuple[httpx.Response, Batch | None]:
    """A batch selected over the pages; ``verified``: and its checklist gone through, when it
    has an eligible task."""
    before = set(Batch.objects.values_list("id", flat=True))
    answer = send(console, "/batches/new", data)
    created = Batch.objects.exclude(id__in=before).first()
    if verified and created is not None and created.items.filter(ineligible="").exists():
        verify(console, created)
    return answer, created


def test_ticked_rows_through_verify_decide_confirm_to_the_export(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=4, label="inc-9"
    )
    supervisor = people["supervisor"]
    with signed_in(orbit_server.url, supervisor) as console:
        queue = console.get("/?business_key=inc-9:0").text
        assert 'form="batch-form"' in queue and "Review in a batch" in queue
        ticked = [*incident, world["tasks"]["failed"]]
        answer, batch = new_batch(console, action="review", scope="ticked", task=ticked)
        assert answer.status_code == 302 and batch is not None
        page = console.get(f"/batches/{batch.id}").text
        assert "4 tasks are eligible" in text_of(page)
        assert "Wrong state for this action" in page  # the FAILED task, left out

        # Decide with a mistake: shown inline, nothing kept.
        bad = send(console, f"/batches/{batch.id}/decide", {**REVIEW, "reason": "  "})
        assert bad.status_code == 400 and 'role="alert"' in bad.text
        batch.refresh_from_db()
        assert batch.decision == ""
        send(console, f"/batches/{batch.id}/decide", REVIEW)
        page = console.get(f"/batches/{batch.id}").text
        assert "&quot;lost&quot;: &quot;inc-9:" in page  # the representative body, filled in

        # The count typed back must be the eligible count.
        wrong = send(console, f"/batches/{batch.id}/confirm", {"count": "5", "confirm": "on"})
        assert wrong.status_code == 400
        assert "Type the number of tasks to be sent: 4" in text_of(wrong.text)
        batch.refresh_from_db()
        assert batch.state == BatchState.DRAFT
        send(console, f"/batches/{batch.id}/confirm", {"count": "4", "confirm": "on"})
        batch.refresh_from_db()
        assert batch.state == BatchState.RUNNING

        run_worker()
        page = console.get(f"/batches/{batch.id}").text
        assert "Finished" in page and f'ws-connect="/ws/batches/{batch.id}"' in page
        for task_id in incident:
            assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1
        # Each task's timeline links the batch its decision was part of.
        assert f'href="/batches/{batch.id}"' in console.get(f"/tasks/{incident[0]}").text

        exported = console.get(f"/batches/{batch.id}/outcomes.csv")
        assert exported.headers["content-type"].startswith("text/csv")
        rows = list(csv.DictReader(io.StringIO(exported.text)))
        assert {r["task_id"]: r["outcome"] for r in rows} == {
            **dict.fromkeys(incident, ItemOutcome.APPLIED),
            world["tasks"]["failed"]: ItemOutcome.SKIPPED,
        }
        assert all(r["audit_id"] for r in rows if r["outcome"] == ItemOutcome.APPLIED)
        lines = console.get(f"/batches/{batch.id}/outcomes.jsonl").text.splitlines()
        assert len(lines) == 5 and {json.loads(line)["task_id"] for line in lines} == set(ticked)


def test_all_matching_takes_every_page_not_only_the_one_shown(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The work queue shows 25 rows; "all matching" selects all 30 of the filter."""
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=30, label="inc-30"
    )
    with signed_in(orbit_server.url, people["supervisor"]) as console:
        # Before selecting, the bar counts what "every task matching" takes, per action.
        queue = console.get("/?business_key_prefix=inc-30:", headers={"HX-Request": "true"}).text
        assert 'id="batch-scope" hx-swap-oob="true"' in queue  # a new filter resets the choice
        assert 'name="business_key_prefix" value="inc-30:"' in queue
        counted = console.get("/batches/matching?business_key_prefix=inc-30:").text
        assert text_of(element(counted, r'<span id="matching-count".*?</span>\n')) == (
            "30 to review · 0 to retry"
        )
        _, batch = new_batch(console, action="review", scope="all", business_key_prefix="inc-30:")
        assert batch is not None
        assert set(BatchItem.objects.filter(batch=batch).values_list("task_id", flat=True)) == set(
            incident
        )
        assert json.loads(batch.selection)["business_key_prefix"] == "inc-30:"


def test_over_the_limit_is_refused_and_nothing_is_stored(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=3, label="inc-3"
    )
    server = DaphneServer("batch-limit", env={"CONSOLE_BATCH_MAX_TASKS": "2"}).start()
    try:
        with signed_in(server.url, people["supervisor"]) as console:
            answer, batch = new_batch(
                console, action="review", scope="all", business_key_prefix="inc-3:"
            )
            assert batch is None and answer.status_code == 302
            assert "at most 2 tasks" in console.get(answer.headers["location"]).text
            counted = console.get("/batches/matching?business_key_prefix=inc-3:").text
            assert "more than 2 to review: narrow the filter" in text_of(counted)
            # Issue 30: over the limit, the batch button is not offered; the reason is.
            buttons = element(counted, r'<span id="batch-buttons".*?</span>\s*</span>')
            assert 'value="review"' not in buttons
            assert "No review batch: a batch holds at most 2 tasks" in text_of(buttons)
    finally:
        server.stop()


def test_others_cannot_see_decide_or_steer_a_batch(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2, label="inc-2"
    )
    with signed_in(orbit_server.url, people["supervisor"]) as console:
        _, batch = new_batch(console, action="review", scope="ticked", task=incident)
    assert batch is not None
    other = make_person(world, "supervisor")
    with signed_in(orbit_server.url, other) as console:
        assert console.get(f"/batches/{batch.id}").status_code == 200  # same namespace
        send(console, f"/batches/{batch.id}/decide", REVIEW)
        batch.refresh_from_db()
        assert batch.decision == ""  # only its author decides it
    auditor = people["auditor"]
    with signed_in(orbit_server.url, auditor) as console:
        answer = send(console, "/batches/new", {"action": "review", "task": incident})
        assert answer.status_code == 403
    from orbit_console.ledger.seed import seed_world

    elsewhere = make_person(seed_world(label="elsewhere"), "supervisor")
    with signed_in(orbit_server.url, elsewhere) as console:
        assert console.get(f"/batches/{batch.id}").status_code == 404
        assert console.get(f"/batches/{batch.id}/outcomes.csv").status_code == 404


def test_business_keys_as_long_as_the_api_allows_are_selected_whole(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Issue 29: the API allows business keys of 512 characters; a batch item held 255, and on
    MariaDB one longer key failed "every task matching" its whole filter with a 500."""
    label = "long-" + "k" * 500
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2, label=label
    )
    with signed_in(orbit_server.url, people["supervisor"]) as console:
        answer, batch = new_batch(
            console, action="review", scope="all", business_key_prefix=label[:255]
        )
        assert answer.status_code == 302 and batch is not None
        keys = dict(BatchItem.objects.filter(batch=batch).values_list("task_id", "business_key"))
        assert keys == {task_id: f"{label}:{n}" for n, task_id in enumerate(incident)}
        assert len(keys[incident[0]]) == 507
        assert label in console.get(f"/batches/{batch.id}").text


def test_a_template_too_large_once_filled_is_refused_at_the_result_naming_the_task(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Issue 29: the decide step checks each filled-in result against the API's limit (O5)
    before keeping anything; the error is shown at the result field and names the task."""
    tasks = needs_review_tasks(world, 2, handler="h" * 200)
    with signed_in(orbit_server.url, people["supervisor"]) as console:
        _, batch = new_batch(console, action="review", scope="ticked", task=tasks)
        assert batch is not None
        template = json.dumps(["{{handler}}"] * 1400)
        answer = send(console, f"/batches/{batch.id}/decide", {**REVIEW, "result": template})
        assert answer.status_code == 400
        field = element(
            answer.text, r'<div class="field has-error">\s*<label for="id_result">.*?</ul></div>'
        )
        assert f"Filled in for task {tasks[0]}, the result would be" in text_of(field)
        batch.refresh_from_db()
        assert batch.decision == ""


def test_the_csv_export_defuses_formulas_and_every_export_is_recorded(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Issue 29: a business key a spreadsheet would run as a formula is exported as text (one
    helper for every CSV export, lib/csvcells.py), and an export of a batch's outcomes is in
    the console's record, as an export of the record itself is."""
    formula = '=HYPERLINK("http://evil.example","x")'
    [task_id] = needs_review_tasks(world, 1, business_key=formula)
    supervisor = people["supervisor"]
    with signed_in(orbit_server.url, supervisor) as console:
        _, batch = new_batch(console, action="review", scope="ticked", task=[task_id])
        assert batch is not None
        exported = console.get(f"/batches/{batch.id}/outcomes.csv").text
        [row] = csv.DictReader(io.StringIO(exported))
        assert row["business_key"] == "'" + formula
        lines = console.get(f"/batches/{batch.id}/outcomes.jsonl").text.splitlines()
        assert json.loads(lines[0])["business_key"] == formula  # JSON is data already
    records = ConsoleEvent.objects.filter(batch=batch, kind="batch.exported").order_by("seq")
    assert [(r.actor_id, json.loads(r.note)["format"]) for r in records] == [
        (supervisor.user.pk, "csv"),
        (supervisor.user.pk, "jsonl"),
    ]
    assert all(r.namespace_id == world["namespace_id"] for r in records)


# --- Issue 30: batches follow the single wizard's rules ------------------------------------------


def test_a_needs_review_filter_offers_no_retry_and_builds_no_retry_batch(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The offer counts only the tasks the action may take: "every task matching" a
    NEEDS_REVIEW filter offers no retry (it used to offer "39 to retry", then build a batch of
    0 eligible tasks)."""
    seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=3, label="nr-only"
    )
    with signed_in(orbit_server.url, people["supervisor"]) as console:
        query = "state=NEEDS_REVIEW&business_key_prefix=nr-only:"
        counted = console.get(f"/batches/matching?{query}").text
        shown = text_of(element(counted, r'<span id="matching-count".*?</span>\n'))
        assert shown == "3 to review · 0 to retry"
        buttons = element(counted, r'<span id="batch-buttons".*?</span>\s*</span>')
        assert 'value="review"' in buttons and 'value="retry"' not in buttons
        assert "No retry batch: no task matching this filter can be retried." in text_of(buttons)
        answer, batch = new_batch(
            console,
            action="retry",
            scope="all",
            state="NEEDS_REVIEW",
            business_key_prefix="nr-only:",
        )
        assert batch is None and answer.status_code == 302
        assert "No task matching this filter can take this action." in text_of(
            console.get(answer.headers["location"]).text
        )
        # Ticked rows are the person's own choice: a retry batch of them says why it is empty.
        ticked = console.get("/?state=NEEDS_REVIEW&business_key_prefix=nr-only:").text
        assert 'value="retry" class="primary"' in ticked


def test_a_batch_with_nothing_eligible_shows_no_decide_form_but_says_why(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    with signed_in(orbit_server.url, people["operator"]) as console:
        _, batch = new_batch(
            console, action="retry", scope="ticked", task=[world["tasks"]["needs_review"]]
        )
        assert batch is not None
        page = console.get(f"/batches/{batch.id}").text
        assert 'id="nothing-eligible"' in page
        assert "No task of this batch is eligible: there is nothing to decide." in text_of(page)
        assert "/decide" not in page and "/verify" not in page and "/confirm" not in page
        assert f'action="/batches/{batch.id}/discard"' in page
        refused = send(
            console, f"/batches/{batch.id}/verify", dict.fromkeys(CHECKLIST["retry"], "on")
        )
        assert refused.status_code == 302
        batch.refresh_from_db()
        assert batch.verified_at is None


def test_the_verify_checklist_comes_before_the_decision(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """As for a single task, the decide step opens only once the checklist is ticked: a
    missing box is told at the box, the others stay ticked."""
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2, label="verify"
    )
    with signed_in(orbit_server.url, people["operator"]) as console:
        _, batch = new_batch(console, verified=False, action="review", task=incident)
        assert batch is not None
        page = console.get(f"/batches/{batch.id}").text
        assert 'id="verify-form"' in page and 'name="outcome"' not in page
        assert '<li aria-current="step">Verify</li>' in page
        # Deciding before verifying changes nothing.
        send(console, f"/batches/{batch.id}/decide", REVIEW)
        batch.refresh_from_db()
        assert batch.decision == ""
        some = dict.fromkeys(CHECKLIST["review"][:3], "on")
        missing = send(console, f"/batches/{batch.id}/verify", some)
        assert missing.status_code == 400
        box = element(missing.text, r'<input type="checkbox" name="checked_lease"[^>]*>')
        assert 'aria-describedby="id_checked_lease_error"' in box and "autofocus" in box
        assert 'id="id_checked_lease_error"' in missing.text
        kept = element(missing.text, r'<input type="checkbox" name="checked_sample"[^>]*>')
        assert "checked" in kept
        verify(console, batch)
        batch.refresh_from_db()
        assert batch.verified_at is not None
        assert ConsoleEvent.objects.filter(batch=batch, kind="batch.verified").count() == 1
        page = console.get(f"/batches/{batch.id}").text
        assert 'name="outcome"' in page and 'id="verify-form"' not in page
        assert '<li class="done">Verify</li>' in page
        assert '<li aria-current="step">Decide</li>' in page


def test_a_wrong_count_is_told_at_the_field_and_nothing_typed_is_cleared(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2, label="count"
    )
    with signed_in(orbit_server.url, people["operator"]) as console:
        _, batch = new_batch(console, action="review", task=incident)
        assert batch is not None
        send(console, f"/batches/{batch.id}/decide", REVIEW)
        wrong = send(console, f"/batches/{batch.id}/confirm", {"count": "3", "confirm": "on"})
        assert wrong.status_code == 400
        field = element(wrong.text, r'<input type="text" name="count"[^>]*>')
        assert 'value="3"' in field and "autofocus" in field
        assert 'aria-describedby="id_count_helptext id_count_error"' in field
        error = element(wrong.text, r'<div class="errorlist" id="id_count_error".*?</div>')
        assert "Type the number of tasks to be sent: 2." in text_of(error)
        tick = element(wrong.text, r'<input type="checkbox" name="confirm"[^>]*>')
        assert "checked" in tick
        button = element(wrong.text, r'<button type="submit" class="primary">Send the batch')
        assert button
        batch.refresh_from_db()
        assert batch.state == BatchState.DRAFT


def test_a_draft_is_discarded_by_its_author_recorded_and_closed(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2, label="discard"
    )
    with (
        signed_in(orbit_server.url, people["operator"]) as author,
        signed_in(orbit_server.url, people["supervisor"]) as other,
    ):
        _, batch = new_batch(author, action="review", task=incident)
        assert batch is not None
        send(author, f"/batches/{batch.id}/decide", REVIEW)
        assert (
            other.post(
                f"/batches/{batch.id}/discard", [("csrfmiddlewaretoken", other.csrf_token())]
            ).status_code
            == 403
        )
        answer = send(author, f"/batches/{batch.id}/discard", {})
        assert answer.status_code == 302
        batch.refresh_from_db()
        assert batch.state == BatchState.DISCARDED and batch.finished_at is not None
        [event] = ConsoleEvent.objects.filter(batch=batch, kind="batch.discarded")
        assert event.actor_id == people["operator"].user.pk
        page = author.get(f"/batches/{batch.id}").text
        assert 'id="batch-discarded"' in page
        assert "/confirm" not in page and "/discard" not in page and 'name="outcome"' not in page
        # Nothing opens again: not the decision, not the confirmation.
        send(author, f"/batches/{batch.id}/confirm", {"count": "2", "confirm": "on"})
        batch.refresh_from_db()
        assert batch.state == BatchState.DISCARDED


def test_the_frozen_batch_explains_tasks_that_stopped_matching_after_the_count(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """ "305 counted, 303 frozen" used to go unexplained: the page counts and names the tasks
    that stopped matching between the count and the freeze, by reason, and those that
    started to."""
    from orbit_console.ledger.models import Task

    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=5, label="drift"
    )
    with signed_in(orbit_server.url, people["supervisor"]) as console:
        counted = console.get("/batches/matching?business_key_prefix=drift:").text
        hidden = element(
            counted, r'<input type="hidden" form="batch-form" name="counted_review"[^>]*>'
        )
        assert 'value="5"' in hidden
        # Between the count and the freeze, one task is decided elsewhere, one is renamed, and
        # a new one comes.
        Task.objects.filter(id=incident[0]).update(state="SUCCEEDED")
        Task.objects.filter(id=incident[1]).update(business_key="elsewhere")
        [newcomer] = seed_incident(
            namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=1, label="drift"
        )
        _, batch = new_batch(
            console, action="review", scope="all", business_key_prefix="drift:", counted_review="5"
        )
        assert batch is not None
        assert set(batch.items.values_list("task_id", flat=True)) == {*incident[2:], newcomer}
        page = console.get(f"/batches/{batch.id}").text
        said = text_of(element(page, r'<p id="count-change">.*?</p>'))
        assert said.startswith(
            "5 counted, 4 frozen: 2 stopped matching the filter between the count and the "
            "freeze (their state or fields changed meanwhile). 1 started matching"
        )
        state = text_of(element(page, r'<tr data-stopped="state">.*?</tr>'))
        assert "Its state changed" in state and "(now SUCCEEDED)" in state
        assert f'href="/tasks/{incident[0]}"' in element(page, r'<tr data-stopped="state">.*?</tr>')
        renamed = element(page, r'<tr data-stopped="filter">.*?</tr>')
        assert "no longer matches the filter" in text_of(renamed)
        assert f'href="/tasks/{incident[1]}"' in renamed


def test_progress_before_approval_claims_nothing_settled_or_on_its_way(
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    settings: Any,
) -> None:
    """ "1 of 6 settled · On their way 5" was shown while the batch still waited for approval;
    the fragment (also pushed live) says what is true in each state."""
    from django.template.loader import render_to_string

    from orbit_console.console.views.batches import progress_context
    from orbit_console.decisions import batches as batch_rules
    from tests.approvals.conftest import required_policy

    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2, label="before"
    )
    with signed_in(orbit_server.url, people["operator"]) as console:
        _, batch = new_batch(console, action="review", task=[*incident, world["tasks"]["failed"]])
        assert batch is not None
    send_decision = batch_rules.decision_fields(
        "review",
        {"outcome": "FAILED", "result": {"lost": True}, "reason": "r", "evidence_ref": "e:1"},
    )
    batch_rules.batch_decide(batch, person=people["operator"].user, decision=send_decision)
    settings.CONSOLE_APPROVAL_POLICY = required_policy()
    batch = batch_rules.batch_submit(batch, person=people["operator"].user, typed_count=2)
    assert batch.state == BatchState.PROPOSED
    shown = text_of(
        render_to_string("console/partials/batch_progress.html", progress_context(batch))
    )
    assert "settled" not in shown and "On their way" not in shown
    assert "Nothing is sent before it is approved: then 2 tasks will be sent." in shown
    assert "1 task is left out (not eligible)." in shown


def test_a_changed_decision_shows_the_result_as_its_author_typed_it(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Issue 30: a batch's result template came back compacted when the decision was shown
    again to be changed ({"lost":"..."}): the author's spacing and line breaks were lost."""
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=1, label="spaced"
    )
    typed = '{\n  "lost" :  "{{business_key}}",\n  "checked":   true\n}'
    with signed_in(orbit_server.url, people["supervisor"]) as console:
        _, batch = new_batch(console, action="review", scope="ticked", task=incident)
        assert batch is not None
        send(console, f"/batches/{batch.id}/decide", {**REVIEW, "result": typed})
        page = console.get(f"/batches/{batch.id}").text
        shown = element(page, r'<textarea name="result".*?</textarea>')
        assert html.escape(typed, quote=True) in shown, shown
        batch.refresh_from_db()
        assert json.loads(batch.decided["result"]) == {"lost": "{{business_key}}", "checked": True}


def test_a_retry_batch_verifies_then_decides_with_the_single_retrys_fields(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    with signed_in(orbit_server.url, people["supervisor"]) as console:
        _, batch = new_batch(
            console, verified=False, action="retry", task=[world["tasks"]["failed"]]
        )
        assert batch is not None
        page = console.get(f"/batches/{batch.id}").text
        assert 'name="checked_business_key"' in page and 'name="budget_value"' not in page
        verify(console, batch)
        page = console.get(f"/batches/{batch.id}").text
        form = element(page, r'<form method="post" action="/batches/[^"]+/decide".*?</form>')
        for name in ("reason", "evidence_ref", "budget_value", "budget_unit", "available_at"):
            assert f'name="{name}"' in form
        assert '<button type="submit" class="primary">Next: confirm</button>' in form
