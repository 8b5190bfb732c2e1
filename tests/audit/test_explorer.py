"""The audit explorer over real HTTP (issue 6): filters by person, action, outcome, task, queue
and time range (in the person's time zone); keyset paging; streamed CSV and JSON Lines exports
of exactly the filtered entries, each export itself recorded; the platform's operation detail
as a before → after diff; and auditors read-only everywhere, even with crafted requests.

The console's record is one table shared by every test of the run: each test filters on people
of its own (fresh user names), so the entries it expects form a closed set.
"""

import csv
import io
import json
import re
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from html import unescape
from typing import Any

import httpx
import pytest
from django.db import transaction
from django.urls import reverse
from django.utils import timezone

from orbit_console.console.explorer import EXPORT_BATCH
from orbit_console.console.views.wizards import Pin
from orbit_console.decisions.models import (
    Approval,
    ConsoleEvent,
    Proposal,
    Submission,
    SubmissionState,
)
from orbit_console.decisions.proposals import proposal_create
from orbit_console.decisions.submissions import record_event, submission_create
from orbit_console.ledger.models import Task
from tests.console.web import (
    Console,
    element,
    forms_of,
    review_through_console,
    review_values,
    text_of,
)
from tests.support.orbit import RETRY_REVISION, REVIEW_REVISION, get_task, post, review_body
from tests.support.people import TestPerson, make_person

ROW_ID = re.compile(r'<tr id="event-([0-9a-f]{32})">')
NEXT_LINK = re.compile(r'<a href="\?([^"]*)" rel="next">')


# --- Helpers ------------------------------------------------------------------------------------


def entry_ids(html: str) -> list[str]:
    return ROW_ID.findall(html)


def explore(console: Console, **params: str) -> httpx.Response:
    page = console.get("/audit", params=params)
    assert page.status_code == 200, text_of(page.text)
    return page


def shown(console: Console, **params: str) -> list[str]:
    return entry_ids(explore(console, **params).text)


def newest_first(**filters: Any) -> list[str]:
    """The ids the explorer should list for ``filters`` (ORM lookups), newest first."""
    rows = ConsoleEvent.objects.filter(**filters).order_by("-created_at", "-id")
    return list(rows.values_list("id", flat=True))


def store(
    person: TestPerson,
    task_id: str,
    *,
    queue_id: str = "",
    revision: str = REVIEW_REVISION,
    action: str = "review",
) -> Submission:
    """A decision stored by ``person`` (never sent): one ``submission.stored`` event."""
    return submission_create(
        action=action,
        task_id=task_id,
        queue_id=queue_id,
        expected_revision=revision,
        body='{"stored": true}',
        created_by=person.user,
    ).submission


def many_events(
    submission: Submission,
    person: TestPerson,
    count: int,
    *,
    same_time_every: int = 1,
    notes: Callable[[int], str] = lambda index: f"entry {index}",
) -> None:
    """``count`` more events by ``person``, in one transaction; ``same_time_every`` events share
    one ``created_at`` (ties that only the id orders)."""
    start = timezone.now() - timedelta(hours=1)
    with transaction.atomic():
        for index in range(count):
            moment = start + timedelta(milliseconds=index // same_time_every)
            record_event(
                "submission.sent",
                submission=submission,
                actor=person.user,
                note=notes(index),
                now=moment,
            )


def exported_events(person: TestPerson) -> list[ConsoleEvent]:
    return list(
        ConsoleEvent.objects.filter(kind="audit.exported", actor=person.user).order_by("seq")
    )


def csv_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def jsonl_rows(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines() if line]


@pytest.fixture
def crew(world: dict[str, Any], people: dict[str, TestPerson]) -> dict[str, TestPerson]:
    """The seeded operator, supervisor and auditor, plus a second operator."""
    return {**people, "operator_2": make_person(world, "operator")}


@pytest.fixture
def auditor(console_as: Callable[..., Console], people: dict[str, TestPerson]) -> Console:
    return console_as(people["auditor"])


# --- Filters ------------------------------------------------------------------------------------


def test_explorer_filters_by_person(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    one, two = crew["operator"], crew["operator_2"]
    store(one, world["tasks"]["needs_review"], queue_id=world["queue_id"])
    store(one, world["tasks"]["failed"], queue_id=world["queue_id"], revision=RETRY_REVISION)
    store(two, world["tasks"]["needs_review_2"], queue_id=world["queue_id"])

    mine = newest_first(actor=one.user)
    assert len(mine) == 2
    assert shown(auditor, person=one.username) == mine
    assert shown(auditor, person=two.username) == newest_first(actor=two.user)
    assert shown(auditor, person="nobody-" + one.username) == []
    page = explore(auditor, person=one.username).text
    assert one.username in text_of(element(page, r'<div id="results">.*</table>'))
    assert two.username not in text_of(element(page, r'<div id="results">.*</table>'))


def test_explorer_filters_by_action(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    operator = crew["operator"]
    submission = store(operator, world["tasks"]["needs_review"])
    many_events(submission, operator, 3)
    record_event("submission.rejected", submission=submission, actor=operator.user, note="no")

    sent = shown(auditor, person=operator.username, kind="submission.sent")
    assert sent == newest_first(actor=operator.user, kind="submission.sent")
    assert len(sent) == 3
    rejected = shown(auditor, person=operator.username, kind="submission.rejected")
    assert rejected == newest_first(actor=operator.user, kind="submission.rejected")
    assert len(rejected) == 1
    # Without the person: every entry listed is of that action, whoever made it.
    listed = shown(auditor, kind="submission.rejected")
    assert rejected[0] in listed
    kinds = set(ConsoleEvent.objects.filter(id__in=listed).values_list("kind", flat=True))
    assert kinds == {"submission.rejected"}


def test_explorer_filters_by_outcome(
    auditor: Console,
    console_as: Callable[..., Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    """The outcome is the submission's state: applied, rejected, still open..."""
    operator = crew["operator"]
    applied_id, _ = review_through_console(console_as(operator), world["tasks"]["needs_review"])
    pending = store(operator, world["tasks"]["needs_review_2"])

    applied = shown(auditor, person=operator.username, outcome=SubmissionState.SUCCEEDED)
    assert applied == newest_first(actor=operator.user, submission_id=applied_id)
    assert {"submission.stored", "submission.sent", "submission.receipt"} == set(
        ConsoleEvent.objects.filter(id__in=applied).values_list("kind", flat=True)
    )
    open_ = shown(auditor, person=operator.username, outcome=SubmissionState.PENDING)
    assert open_ == newest_first(submission=pending)
    assert shown(auditor, person=operator.username, outcome=SubmissionState.REJECTED) == []
    listed = shown(auditor, outcome=SubmissionState.SUCCEEDED)
    states = set(Submission.objects.filter(events__id__in=listed).values_list("state", flat=True))
    assert states == {SubmissionState.SUCCEEDED}


def test_explorer_filters_by_task_and_queue(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    operator = crew["operator"]
    other_queue = Task.objects.get(id=world["tasks"]["queue_full_failed"]).queue_id
    assert other_queue != world["queue_id"]
    first = store(operator, world["tasks"]["needs_review"], queue_id=world["queue_id"])
    store(operator, world["tasks"]["needs_review_2"], queue_id=world["queue_id"])
    elsewhere = store(
        operator, world["tasks"]["queue_full_failed"], queue_id=other_queue, action="retry"
    )
    many_events(first, operator, 2)

    by_task = shown(auditor, task_id=world["tasks"]["needs_review"])
    assert by_task == newest_first(task_id=world["tasks"]["needs_review"])
    assert len(by_task) == 3
    by_queue = shown(auditor, queue_id=world["queue_id"])
    assert by_queue == newest_first(queue_id=world["queue_id"])
    assert len(by_queue) == 4
    assert shown(auditor, queue_id=other_queue) == newest_first(submission=elsewhere)
    both = shown(auditor, queue_id=world["queue_id"], task_id=world["tasks"]["needs_review_2"])
    assert both == newest_first(task_id=world["tasks"]["needs_review_2"])


def test_explorer_finds_by_the_start_of_an_id_or_a_name_and_refuses_a_shared_start(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    """Issue 15: the 8 characters every page shows found nothing in the task filter. An id's
    start finds it; a start that several ids share is refused, naming them; a person is found
    by the first letters of their name, in any case."""
    operator, other = crew["operator"], crew["operator_2"]
    shared = secrets.token_hex(4)
    first = store(operator, shared + "1" + secrets.token_hex(12)[:23], queue_id=world["queue_id"])
    second = store(other, shared + "2" + secrets.token_hex(12)[:23], queue_id=world["queue_id"])

    assert shown(auditor, task_id=first.task_id[:9]) == newest_first(task_id=first.task_id)
    assert shown(auditor, task_id=second.task_id[:9]) == newest_first(task_id=second.task_id)
    refused = explore(auditor, task_id=shared)
    assert entry_ids(refused.text) == []
    message = text_of(element(refused.text, r'<div class="errorlist"[^>]*role="alert">.*?</div>'))
    assert f"Several ids start with {shared}" in message
    assert first.task_id[:12] in message and second.task_id[:12] in message
    assert shown(auditor, queue_id=world["queue_id"][:8]) == newest_first(
        queue_id=world["queue_id"]
    )

    start = operator.username[:12].upper()
    assert shown(auditor, person=start) == newest_first(actor=operator.user)


def test_explorer_filters_by_time_range_in_the_persons_time_zone(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    operator = crew["operator"]
    submission = store(operator, world["tasks"]["needs_review"])
    at = {
        hour: record_event(
            "submission.sent",
            submission=submission,
            actor=operator.user,
            note=f"{hour}:00 UTC",
            now=datetime(2021, 6, 1, hour, tzinfo=UTC),
        ).id
        for hour in (10, 12, 14)
    }
    person = operator.username

    # UTC (no time zone cookie): 11:00 to 13:00 holds the 12:00 entry only.
    assert shown(auditor, person=person, since="2021-06-01T11:00", until="2021-06-01T13:00") == [
        at[12]
    ]
    # Shanghai is UTC+8: the same wall-clock times are 03:00 to 05:00 UTC, nothing;
    # 19:00 to 21:00 there is 11:00 to 13:00 UTC.
    auditor.http.cookies.set("orbit_tz", "Asia/Shanghai")
    try:
        assert (
            shown(auditor, person=person, since="2021-06-01T11:00", until="2021-06-01T13:00") == []
        )
        assert shown(
            auditor, person=person, since="2021-06-01T19:00", until="2021-06-01T21:00"
        ) == [at[12]]
        # ``since`` includes its instant, ``until`` excludes it.
        assert shown(
            auditor, person=person, since="2021-06-01T20:00", until="2021-06-01T22:00:00"
        ) == [at[12]]
        assert shown(
            auditor, person=person, since="2021-06-01T20:00", until="2021-06-01T22:00:01"
        ) == [at[14], at[12]]
        assert shown(
            auditor, person=person, since="2021-06-01T18:00", until="2021-06-01T20:00"
        ) == [at[10]]
        assert shown(auditor, person=person, until="2021-06-01T20:00:01") == [at[12], at[10]]
    finally:
        auditor.http.cookies.delete("orbit_tz")
    newer = shown(auditor, person=person, since="2021-06-01T13:00")
    assert newer == newest_first(
        actor=operator.user, created_at__gte=datetime(2021, 6, 1, 13, tzinfo=UTC)
    )
    assert at[14] in newer and at[12] not in newer


def test_explorer_explains_an_invalid_filter(auditor: Console) -> None:
    page = explore(
        auditor, task_id="not-a-task", since="2021-06-02T00:00", until="2021-06-01T00:00"
    )
    text = text_of(page.text)
    assert "A task id, or its first characters: lowercase hexadecimal (0-9, a-f)." in text
    assert "The end must come after the start." in text
    assert entry_ids(page.text) == []


def test_explorer_entries_link_to_the_task_timeline_and_the_platform_operation(
    auditor: Console,
    console_as: Callable[..., Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    task_id = world["tasks"]["needs_review"]
    submission_id, _ = review_through_console(console_as(crew["operator"]), task_id)
    audit_id = Submission.objects.get(id=submission_id).audit_id
    receipt = ConsoleEvent.objects.get(submission_id=submission_id, kind="submission.receipt")
    page = explore(auditor, person=crew["operator"].username)
    row = element(page.text, rf'<tr id="event-{receipt.id}">.*?</tr>')
    assert f'href="/tasks/{task_id}#timeline-title"' in row
    assert f'href="/tasks/{task_id}/operations/{audit_id}"' in row
    assert f'href="/submissions/{submission_id}"' in row
    assert auditor.get(f"/tasks/{task_id}").status_code == 200


def test_explorer_fragment_and_page_vary_on_hx_request(
    auditor: Console, people: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    """htmx swaps in the results fragment and pushes the URL: a browser going Back to that URL
    must not be served the fragment from its cache instead of the page."""
    store(people["operator"], world["tasks"]["needs_review"])
    params = {"person": people["operator"].username}
    fragment = auditor.get("/audit", params=params, headers={"HX-Request": "true"})
    page = explore(auditor, **params)
    for response in (fragment, page):
        assert "hx-request" in response.headers.get("vary", "").lower()
    assert fragment.text.lstrip().startswith('<div id="results">')
    assert "<html" not in fragment.text and 'id="id_person"' not in fragment.text
    assert "<html" in page.text and 'id="id_person"' in page.text
    assert (
        entry_ids(fragment.text)
        == entry_ids(page.text)
        == newest_first(actor=people["operator"].user)
    )


# --- Keyset paging ------------------------------------------------------------------------------


def walk(console: Console, **params: str) -> tuple[list[str], list[int]]:
    """Follow the explorer's "Older" links from the first page; every id and each page's size."""
    ids: list[str] = []
    sizes: list[int] = []
    query = httpx.QueryParams(params)
    for _ in range(100):
        page = console.get("/audit", params=query)
        assert page.status_code == 200, text_of(page.text)
        found = entry_ids(page.text)
        ids += found
        sizes.append(len(found))
        link = NEXT_LINK.search(page.text)
        if link is None:
            return ids, sizes
        query = httpx.QueryParams(unescape(link.group(1)))
        assert query.get("person") == params["person"], "the next page lost the filter"
    raise AssertionError("the explorer's pages never end")


def test_keyset_paging_walks_every_entry_once_in_order(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    operator = crew["operator"]
    submission = store(operator, world["tasks"]["needs_review"])
    many_events(submission, operator, 119, same_time_every=7)  # ties across page borders
    expected = newest_first(actor=operator.user)
    assert len(expected) == 120

    ids, sizes = walk(auditor, person=operator.username)
    assert ids == expected
    assert len(set(ids)) == len(ids)
    assert sizes == [50, 50, 20]


def test_keyset_paging_is_not_disturbed_by_new_entries(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    operator = crew["operator"]
    submission = store(operator, world["tasks"]["needs_review"])
    many_events(submission, operator, 59)
    expected = newest_first(actor=operator.user)
    first = auditor.get("/audit", params={"person": operator.username})
    link = NEXT_LINK.search(first.text)
    assert link is not None
    record_event("submission.sent", submission=submission, actor=operator.user, note="newer")
    rest = auditor.get("/audit", params=httpx.QueryParams(unescape(link.group(1))))
    assert entry_ids(first.text) + entry_ids(rest.text) == expected


def test_a_tampered_cursor_starts_again_from_the_newest(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    operator = crew["operator"]
    store(operator, world["tasks"]["needs_review"])
    page = explore(auditor, person=operator.username, cursor="forged:cursor")
    assert entry_ids(page.text) == newest_first(actor=operator.user)


# --- Export -------------------------------------------------------------------------------------


def test_exports_hold_exactly_the_filtered_entries(
    auditor: Console,
    console_as: Callable[..., Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    operator = crew["operator"]
    submission_id, _ = review_through_console(console_as(operator), world["tasks"]["needs_review"])
    submission = Submission.objects.get(id=submission_id)
    store(crew["operator_2"], world["tasks"]["needs_review_2"])
    params = {"person": operator.username}
    expected = newest_first(actor=operator.user)
    assert len(expected) == 3

    as_csv = auditor.get("/audit/export.csv", params=params)
    assert as_csv.status_code == 200, as_csv.text
    assert as_csv.headers["content-type"].startswith("text/csv")
    assert re.fullmatch(
        r'attachment; filename="orbit-console-audit-\d{8}T\d{6}Z\.csv"',
        as_csv.headers["content-disposition"],
    )
    rows = csv_rows(as_csv.text)
    assert [row["id"] for row in rows] == expected

    as_jsonl = auditor.get("/audit/export.jsonl", params=params)
    assert as_jsonl.status_code == 200, as_jsonl.text
    assert as_jsonl.headers["content-type"] == "application/x-ndjson"
    lines = jsonl_rows(as_jsonl.text)
    assert [line["id"] for line in lines] == expected

    receipt = ConsoleEvent.objects.get(submission=submission, kind="submission.receipt")
    line = next(line for line in lines if line["id"] == receipt.id)
    assert line == {
        "seq": receipt.seq,
        "id": receipt.id,
        "created_at": line["created_at"],
        "kind": "submission.receipt",
        "actor": operator.username,
        "person": operator.username,
        "approved_by": "",
        "task_id": world["tasks"]["needs_review"],
        "queue_id": world["queue_id"],
        "submission_id": submission.id,
        "submission_state": "succeeded",
        "audit_id": submission.audit_id,
        "proposal_id": "",
        "batch_id": "",
        # Issue 30: the why of every decision, read from its submission (the exact body sent).
        "reason": json.loads(submission.body)["reason"],
        "evidence_ref": json.loads(submission.body)["evidence_ref"],
        "evidence_url": "",  # no evidence policy in this namespace
        "decided_outcome": json.loads(submission.body)["outcome"],
        "body": submission.body,
        "note": receipt.note,
        "prev_hash": receipt.prev_hash,
        "entry_hash": receipt.entry_hash,
    }
    assert datetime.fromisoformat(line["created_at"]) == receipt.created_at
    row = next(row for row in rows if row["id"] == receipt.id)
    assert row == {name: str(value) for name, value in line.items()}

    # A narrower filter exports fewer entries.
    narrow = {**params, "kind": "submission.receipt"}
    assert [
        row["id"] for row in csv_rows(auditor.get("/audit/export.csv", params=narrow).text)
    ] == [receipt.id]


def test_exports_are_streamed(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    """Streamed in keyset batches (EXPORT_BATCH rows each, one more than one batch here, the
    boundary inside a group of rows made at the same moment): no Content-Length, chunked,
    arriving in several pieces, every row once and in order."""
    operator = crew["operator"]
    submission = store(operator, world["tasks"]["needs_review"])
    many_events(submission, operator, EXPORT_BATCH + 499, same_time_every=3)
    expected = newest_first(actor=operator.user)
    assert len(expected) == EXPORT_BATCH + 500

    for fmt in ("csv", "jsonl"):
        chunks: list[bytes] = []
        url = f"/audit/export.{fmt}"
        with auditor.http.stream("GET", url, params={"person": operator.username}) as response:
            assert response.status_code == 200
            assert "content-length" not in response.headers, fmt
            assert response.headers.get("transfer-encoding") == "chunked", fmt
            assert response.headers.get("cache-control") == "no-store"
            chunks = list(response.iter_bytes())
        assert len(chunks) >= 2, fmt
        text = b"".join(chunks).decode()
        rows = csv_rows(text) if fmt == "csv" else jsonl_rows(text)
        assert [row["id"] for row in rows] == expected, fmt


def test_each_export_is_recorded_with_its_filter_and_time(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    operator, person = crew["operator"], crew["auditor"]
    store(operator, world["tasks"]["needs_review"])
    before = exported_events(person)
    params = {
        "person": operator.username,
        "kind": "submission.stored",
        "queue_id": world["queue_id"],
        "since": "2021-06-01T08:00",
        "until": "2099-01-01T00:00",
    }
    auditor.http.cookies.set("orbit_tz", "Asia/Shanghai")
    try:
        started = timezone.now()
        assert auditor.get("/audit/export.csv", params=params).status_code == 200
        jsonl = auditor.get("/audit/export.jsonl", params={"task_id": world["tasks"]["failed"]})
        assert jsonl.status_code == 200
        finished = timezone.now()
    finally:
        auditor.http.cookies.delete("orbit_tz")

    added = exported_events(person)[len(before) :]
    assert len(added) == 2
    first, second = (json.loads(event.note) for event in added)
    assert first["format"] == "csv" and second["format"] == "jsonl"
    assert first["filter"] == {
        "person": operator.username,
        "kind": "submission.stored",
        "queue_id": world["queue_id"],
        "since": "2021-06-01T00:00:00Z",  # 08:00 in Shanghai, recorded in UTC
        "until": "2098-12-31T16:00:00Z",
    }
    assert second["filter"] == {"task_id": world["tasks"]["failed"]}
    for event, note in zip(added, (first, second), strict=True):
        exported_at = datetime.fromisoformat(note["exported_at"])
        assert started - timedelta(seconds=1) <= exported_at <= finished + timedelta(seconds=1)
        assert (event.actor_id, event.task_id, event.submission_id) == (person.user.pk, "", None)
    # The export's own entry is in the record and can itself be found in the explorer.
    assert added[0].id in shown(auditor, person=person.username, kind="audit.exported")


def test_an_invalid_filter_exports_nothing_and_records_nothing(
    auditor: Console, crew: dict[str, TestPerson]
) -> None:
    before = len(exported_events(crew["auditor"]))
    answer = auditor.get("/audit/export.csv", params={"queue_id": "not-a-queue"})
    assert answer.status_code == 400
    assert "A queue id, or its first characters: lowercase hexadecimal" in text_of(answer.text)
    assert len(exported_events(crew["auditor"])) == before


def test_csv_export_defuses_formulas(
    auditor: Console, crew: dict[str, TestPerson], world: dict[str, Any]
) -> None:
    """CSV injection: a cell a spreadsheet would evaluate starts with an apostrophe; the JSON
    Lines export keeps the text as it is."""
    operator = crew["operator"]
    submission = store(operator, world["tasks"]["needs_review"])
    notes = ['=HYPERLINK("http://evil.example","x")', "+1+1", "-2+3", "@SUM(A1:A2)", "\tTAB", "ok"]
    for note in notes:
        record_event("submission.sent", submission=submission, actor=operator.user, note=note)
    params = {"person": operator.username, "kind": "submission.sent"}

    rows = csv_rows(auditor.get("/audit/export.csv", params=params).text)
    assert sorted(row["note"] for row in rows) == sorted(
        ["'" + note for note in notes[:-1]] + ["ok"]
    )
    lines = jsonl_rows(auditor.get("/audit/export.jsonl", params=params).text)
    assert sorted(line["note"] for line in lines) == sorted(notes)


# --- Operation detail ---------------------------------------------------------------------------


def diff_rows(html: str) -> dict[str, tuple[str, str, bool]]:
    table = element(html, r'<table id="operation-diff">.*?</table>')
    rows = re.findall(
        r"<tr( class=\"changed\")?>\s*<th scope=\"row\"[^>]*>(.*?)</th>(.*?)</tr>", table, re.DOTALL
    )
    out = {}
    for changed, name, cells in rows:
        before, after = (
            text_of(cell) for cell in re.findall(r"<td[^>]*>(.*?)</td>", cells, re.DOTALL)
        )
        out[text_of(name)] = (before, after, bool(changed))
    return out


def test_operation_detail_shows_reason_evidence_and_the_diff_AU5(
    auditor: Console, api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    body = review_body(
        reason="Ledger and bank statement agree: <b>not paid</b>",
        evidence_ref="evidence:bank-statement-2021-06",
    )
    receipt = post(api, task_id, "review", world["tokens"]["admin"], body)
    assert receipt.status_code == 200, receipt.text
    audit_id = receipt.json()["data"]["audit_id"]

    page = auditor.get(f"/tasks/{task_id}/operations/{audit_id}")
    assert page.status_code == 200, text_of(page.text)
    reason = element(page.text, r'<dd id="operation-reason">.*?</dd>')
    assert text_of(reason) == body["reason"]
    assert "<b>" not in reason  # rendered as text
    assert (
        text_of(element(page.text, r'<dd class="mono" id="operation-evidence">.*?</dd>'))
        == (body["evidence_ref"])
    )
    assert "task.review" in text_of(element(page.text, r"<h1>.*?</h1>"))
    rows = diff_rows(page.text)
    assert rows["state"] == ('"NEEDS_REVIEW"', '"FAILED"', True)
    assert rows["revision"] == ('"3"', '"4"', True)
    assert rows["effect_uncertain"] == ("—", "false", True)
    assert rows["execution_settled"] == ("—", "true", True)
    digest = rows["result_digest"]
    assert digest[0] == "—" and re.fullmatch(r'"sha256:[0-9a-f]{64}"', digest[1])
    assert list(rows) == [
        "state",
        "revision",
        "effect_uncertain",
        "execution_settled",
        "result_digest",
    ]
    assert f'href="/tasks/{task_id}#timeline-title"' in page.text


def test_operation_detail_of_another_task_or_namespace_is_not_found_AU5_C4(
    auditor: Console, api: httpx.Client, world: dict[str, Any]
) -> None:
    from orbit_console.ledger.seed import seed_world

    task_id = world["tasks"]["needs_review"]
    receipt = post(api, task_id, "review", world["tokens"]["admin"], review_body())
    audit_id = receipt.json()["data"]["audit_id"]
    other = world["tasks"]["failed"]
    assert auditor.get(f"/tasks/{other}/operations/{audit_id}").status_code == 404
    assert auditor.get(f"/tasks/{task_id}/operations/not-an-id").status_code == 404
    elsewhere = seed_world(label="elsewhere")
    foreign = post(
        api,
        elsewhere["tasks"]["needs_review"],
        "review",
        elsewhere["tokens"]["admin"],
        review_body(),
    )
    foreign_id = foreign.json()["data"]["audit_id"]
    path = f"/tasks/{elsewhere['tasks']['needs_review']}/operations/{foreign_id}"
    assert auditor.get(path).status_code == 404


# --- Who may do what ----------------------------------------------------------------------------


def test_auditors_are_read_only_even_with_crafted_requests(
    auditor: Console,
    crew: dict[str, TestPerson],
    world: dict[str, Any],
    api: httpx.Client,
) -> None:
    person = crew["auditor"]
    token = auditor.csrf_token()
    review_task, retry_task = world["tasks"]["needs_review"], world["tasks"]["failed"]
    events = ConsoleEvent.objects.count()

    # The wizards: not even the first page, and no crafted final step with a valid pin.
    for task_id, action, confirmation in (
        (review_task, "review", "execution_settled"),
        (retry_task, "retry", "safe_to_retry"),
    ):
        path = f"/tasks/{task_id}/{action}"
        assert auditor.get(path).status_code == 403, path
        pin = Pin(
            action, task_id, REVIEW_REVISION, 10_000, world["queue_id"], world["namespace_id"]
        ).dumps()
        crafted = [
            ("csrfmiddlewaretoken", token),
            ("pin", pin),
            ("step", "confirm"),
            ("nav", "submit"),
            ("checked_history", "on"),
            ("checked_late_evidence", "on"),
            ("checked_external", "on"),
            ("checked_lease", "on"),
            ("checked_business_key", "on"),
            *review_values(),
            ("budget_value", "10"),
            ("budget_unit", "min"),
            (confirmation, "on"),
        ]
        assert auditor.post(path, crafted).status_code == 403, path

    # Re-sending: someone else's open submission, and even one crafted to be sent as the auditor.
    theirs = store(crew["operator"], world["tasks"]["needs_review_2"])
    own = submission_create(
        action="review",
        task_id=world["tasks"]["needs_review_leased"],
        expected_revision=REVIEW_REVISION,
        body=json.dumps(review_body()),
        created_by=person.user,
    ).submission
    for submission in (theirs, own):
        path = f"/submissions/{submission.id}/resend"
        assert auditor.post(path, [("csrfmiddlewaretoken", token)]).status_code == 403, path
        assert Submission.objects.get(id=submission.id).send_count == 0

    # Four eyes: an operator's pending proposal, and one crafted to be the auditor's own.
    proposals = [
        proposal_create(
            action="review",
            task_id=world["tasks"]["needs_review_workflow"],
            expected_revision=REVIEW_REVISION,
            body=json.dumps(review_body()),
            proposed_by=crew["operator"].user,
        ).proposal,
        proposal_create(
            action="retry",
            task_id=world["tasks"]["cancelled"],
            expected_revision="2",
            body="{}",
            proposed_by=person.user,
        ).proposal,
    ]
    for proposal in proposals:
        for verb, fields in (
            ("approve", [("note", "looks fine")]),
            ("reject", [("reason", "no")]),
            ("withdraw", []),
        ):
            path = f"/proposals/{proposal.id}/{verb}"
            answer = auditor.post(path, [("csrfmiddlewaretoken", token), *fields])
            assert answer.status_code == 403, path
        assert Proposal.objects.get(id=proposal.id).state == "pending"
        assert not Approval.objects.filter(proposal=proposal).exists()

    # Nothing was written by the auditor, and the platform saw no decision.
    assert (
        not ConsoleEvent.objects.filter(actor=person.user)
        .exclude(kind__in=["submission.stored", "proposal.proposed"])
        .exists()
    )
    assert ConsoleEvent.objects.count() == events + 4  # the four rows this test stored itself
    for task_id in (review_task, retry_task):
        task = get_task(api, task_id, world["tokens"]["admin"]).json()["data"]
        assert task["revision"] == "3", task_id


def test_auditor_pages_offer_no_write_control(
    auditor: Console,
    console_as: Callable[..., Console],
    crew: dict[str, TestPerson],
    world: dict[str, Any],
) -> None:
    submission_id, _ = review_through_console(
        console_as(crew["operator"]), world["tasks"]["needs_review"]
    )
    pending = store(crew["operator"], world["tasks"]["needs_review_2"])
    harmless = {reverse("set_language"), reverse("logout"), reverse("signin:sign_out_everywhere")}
    proposal = proposal_create(
        action="retry",
        task_id=world["tasks"]["failed"],
        expected_revision=RETRY_REVISION,
        body="{}",
        proposed_by=crew["operator"].user,
    ).proposal
    for path in (
        "/audit",
        f"/audit?person={crew['operator'].username}",
        *(f"/tasks/{task_id}" for task_id in world["tasks"].values()),
        f"/submissions/{submission_id}",
        f"/submissions/{pending.id}",
        f"/proposals/{proposal.id}",
    ):
        page = auditor.get(path)
        assert page.status_code == 200, path
        assert not re.search(r"/(review|retry|resend|approve|reject|withdraw)\"", page.text), path
        posts = {form.action for form in forms_of(page.text) if form.attrs.get("method") == "post"}
        assert posts == harmless, path  # only the language switch and signing out


def test_operators_may_not_open_the_explorer_or_export(
    console_as: Callable[..., Console], crew: dict[str, TestPerson]
) -> None:
    operator = console_as(crew["operator"])
    for path in ("/audit", "/audit/export.csv", "/audit/export.jsonl", "/audit?person=x"):
        assert operator.get(path).status_code == 403, path
    assert exported_events(crew["operator"]) == []
    assert 'href="/audit"' not in operator.get("/").text


def test_supervisors_may_open_the_explorer(
    console_as: Callable[..., Console], crew: dict[str, TestPerson]
) -> None:
    supervisor = console_as(crew["supervisor"])
    assert supervisor.get("/audit").status_code == 200
    assert supervisor.get("/audit/export.jsonl", params={"person": "x"}).status_code == 200
    assert len(exported_events(crew["supervisor"])) == 1
