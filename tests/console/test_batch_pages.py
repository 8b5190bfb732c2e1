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


def new_batch(console: Console, **data: Any) -> tuple[httpx.Response, Batch | None]:
    before = set(Batch.objects.values_list("id", flat=True))
    answer = send(console, "/batches/new", data)
    created = Batch.objects.exclude(id__in=before).first()
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
        assert "Type the number of tasks to be sent: 4" in text_of(
            console.get(wrong.headers["location"]).text
        )
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
        assert text_of(counted) == "30 to review · 0 to retry"
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
