"""The review and retry wizards over real HTTP, step by step: verify → decide → confirm, the exact
body posted, the durable submission, races and permissions (RV, RT, C9, C10, AU6)."""

import hashlib
import json
import re
import secrets
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest
from django.contrib.auth.models import Group, User
from django.core import signing

from orbit_console.decisions.models import Submission
from orbit_console.insight.models import DecisionFact
from orbit_console.ledger.models import IdempotencyRecord, OperationAudit
from orbit_console.ledger.models import Task as LedgerTask
from orbit_console.lib import strictjson
from orbit_console.people.models import OrbitCredential
from tests.console.web import (
    EVIDENCE,
    REASON,
    RETRY_CHECKS,
    REVIEW_CHECKS,
    Console,
    element,
    form_with,
    pre_text,
    retry_values,
    review_values,
    signed_in,
    step_of,
    submission_id_of,
    text_of,
    wizard_post,
    wizard_submit,
    wizard_to_confirm,
)
from tests.support.orbit import bearer, get_task, review
from tests.support.people import TestPerson
from tests.support.servers import DaphneServer

PIN_SALT = "orbit.console.wizard.pin"
EXACT_RESULT = (
    '{"confirmed": true, "sequence": 9007199254740993, "ratio": 0.10, "hundred": 1e2, '
    '"tiny": -1.5E-7}'
)


@pytest.fixture
def operator(orbit_server: DaphneServer, people: dict[str, TestPerson]) -> Any:
    with signed_in(orbit_server.url, people["operator"]) as console:
        yield console


def field_errors(html: str, name: str) -> list[str]:
    """The inline errors shown beside the field ``name``."""
    for block in re.findall(r'<div class="field has-error">.*?</div>\n', html, re.DOTALL):
        if f'name="{name}"' in block:
            return [text_of(item) for item in re.findall(r"<li>(.*?)</li>", block, re.DOTALL)]
    return []


def audits(task_id: str, action: str) -> list[OperationAudit]:
    return list(OperationAudit.objects.filter(task_id=task_id, action=action))


def to_decide(console: Console, task_id: str, action: str) -> httpx.Response:
    path = f"/tasks/{task_id}/{action}"
    checks = REVIEW_CHECKS if action == "review" else RETRY_CHECKS
    page = wizard_post(console, path, console.get(path).text, checks)
    assert page.status_code == 200 and step_of(page.text) == "decide"
    return page


# --- Review: verify -----------------------------------------------------------------------------


def test_review_wizard_starts_at_verify_with_a_signed_pin(
    operator: Console, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    page = operator.get(f"/tasks/{task_id}/review")
    assert page.status_code == 200
    assert step_of(page.text) == "verify"
    assert re.search(r'<li aria-current="step">Verify</li>', page.text)
    form = form_with(page.text, "pin")
    pin = form.value("pin")
    assert pin is not None
    pinned = signing.loads(pin, salt=PIN_SALT)
    # Action, task, the revision shown, the frozen attempt timeout, the task's queue and
    # namespace (which go with the decision into the console's records).
    assert pinned[:7] == [
        "review",
        task_id,
        "3",
        10000,
        world["queue_id"],
        world["namespace_id"],
        "object.prepare",  # the handler, for the approvals queue
    ]
    # What the decision is made on (issue 43): when the wizard was opened, the last attempt's
    # error code, since when the task has waited (RFC 3339, UTC).
    opened, code, since = pinned[7:]
    assert code == "connection reset" and opened.endswith("Z") and since < opened
    assert "Pinned revision 3" in text_of(page.text)
    assert {"checked_history", "checked_late_evidence", "checked_external", "checked_lease"} <= set(
        form.names
    )
    assert "expired lease alone proves nothing" in text_of(page.text)
    # The evidence of the seed's checklist is on the page: the attempt and its late report.
    assert "connection reset" in text_of(page.text)
    assert "the object store answered 503 after the lease ended" in text_of(page.text)


def test_a_tampered_pin_restarts_the_wizard(operator: Console, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["needs_review"]
    path = f"/tasks/{task_id}/review"
    page = operator.get(path)
    form = form_with(page.text, "pin")
    forged = signing.dumps(["review", task_id, "2", 10000], salt="another salt")
    data = [(n, v if n != "pin" else forged) for n, v in form.hidden]
    answer = operator.post(path, [*data, *REVIEW_CHECKS, ("nav", "next")])
    assert answer.status_code == 302
    assert answer.headers["location"] == path
    # A pin of another task is refused too.
    other = world["tasks"]["needs_review_2"]
    answer = operator.post(f"/tasks/{other}/review", [*form.hidden, *REVIEW_CHECKS])
    assert answer.status_code == 302
    restarted = operator.get(answer.headers["location"])
    assert "out of date" in text_of(restarted.text)


def test_review_verify_requires_every_checklist_box(
    operator: Console, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    path = f"/tasks/{task_id}/review"
    page = operator.get(path)
    ticked = [("checked_history", "on"), ("checked_lease", "on")]
    answer = wizard_post(operator, path, page.text, ticked)
    assert answer.status_code == 400
    assert step_of(answer.text) == "verify"
    for missing in ("checked_late_evidence", "checked_external"):
        assert field_errors(answer.text, missing) == ["This field is required."], missing
    for kept in ("checked_history", "checked_lease"):
        assert field_errors(answer.text, kept) == []
        assert form_with(answer.text, "pin").value(kept) == "on", kept
    assert not Submission.objects.filter(task_id=task_id).exists()


# --- Review: decide -----------------------------------------------------------------------------

BIG_RESULT = '"' + "x" * (256 * 1024 - 1) + '"'  # 256 KiB + 1 byte of JSON text


@pytest.mark.parametrize(
    ("typed", "field", "message"),
    [
        ({"result": '{"confirmed": tru'}, "result", "This is not valid JSON"),
        ({"result": "null"}, "result", "The result must not be null."),
        ({"result": BIG_RESULT}, "result", "The result is larger than 256 KiB."),
        # Issue 30: the rules speak in the voice of "This field is required.".
        ({"reason": "   \n\t "}, "reason", "This field must not be blank."),
        ({"reason": "r" * 1025}, "reason", "at most 1024 characters"),
        (
            {"evidence_ref": "evidence: with spaces"},
            "evidence_ref",
            "This field must not contain whitespace.",
        ),
        ({"evidence_ref": ""}, "evidence_ref", "This field is required."),
    ],
    ids=["invalid-json", "null", "over-256KiB", "blank-reason", "long-reason", "spaces", "empty"],
)
def test_review_decide_explains_each_mistake_inline_and_keeps_what_was_typed_C10_RV3(
    unchanged_world: tuple[dict[str, Any], Console],
    live_db: None,
    typed: dict[str, str],
    field: str,
    message: str,
) -> None:
    world, operator = unchanged_world
    task_id = world["tasks"]["needs_review"]
    page = to_decide(operator, task_id, "review")
    values = {
        "outcome": "SUCCEEDED",
        "result": EXACT_RESULT,
        "reason": "审核, 对象存储里没有写入 <b>",
        "evidence_ref": "evidence:对账-001",
        **typed,
    }
    answer = wizard_post(operator, f"/tasks/{task_id}/review", page.text, list(values.items()))
    assert answer.status_code == 400
    assert step_of(answer.text) == "decide"
    errors = field_errors(answer.text, field)
    assert errors and message in " ".join(errors), errors
    form = form_with(answer.text, "pin")
    for name, value in values.items():
        assert form.value(name) == value, name
    # The checklist ticked on the first step still travels with the form.
    assert ("checked_lease", "on") in form.hidden
    assert not Submission.objects.filter(task_id=task_id).exists()


def test_the_decide_steps_mistakes_are_explained_in_the_readers_language_C10(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Issue 15: the rules' messages ("must not be blank", JSON errors) stayed English on a page
    in zh-Hans. They are the API's own rules, explained in the reader's language."""
    task_id = world["tasks"]["needs_review"]
    with Console(orbit_server.url, headers={"Accept-Language": "zh-Hans"}) as reader:
        reader.sign_in(people["operator"])
        page = to_decide(reader, task_id, "review")
        values = {
            "outcome": "SUCCEEDED",
            "result": '{"confirmed": true "sequence": 1}',
            "reason": "   ",
            "evidence_ref": "evidence: 对账",
        }
        answer = wizard_post(reader, f"/tasks/{task_id}/review", page.text, list(values.items()))
    assert answer.status_code == 400
    assert field_errors(answer.text, "reason") == ["这个字段不能为空白。"]
    assert field_errors(answer.text, "evidence_ref") == ["这个字段不能包含空白字符。"]
    [json_error] = field_errors(answer.text, "result")
    assert "此处应有逗号分隔符" in json_error and "Expecting" not in json_error


def test_review_decide_accepts_the_limits_exactly_C10_O5_O6(
    operator: Console, world: dict[str, Any]
) -> None:
    """1024 code points of reason (3 UTF-8 bytes each) and a result of exactly 256 KiB pass."""
    task_id = world["tasks"]["needs_review"]
    result = '"' + "x" * (256 * 1024 - 2) + '"'
    reason = "审" * 1024
    confirm = wizard_to_confirm(
        operator, task_id, "review", review_values(result=result, reason=reason)
    )
    body = strictjson.loads(pre_text(confirm.text, r'<pre id="request-body">.*?</pre>'))
    assert body["reason"] == reason and len(body["result"]) == 256 * 1024 - 2


def test_back_keeps_what_was_typed(operator: Console, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["needs_review"]
    typed = review_values(outcome="SUCCEEDED", result=EXACT_RESULT, reason="Checked twice")
    confirm = wizard_to_confirm(operator, task_id, "review", typed)
    back = wizard_post(operator, f"/tasks/{task_id}/review", confirm.text, [], nav="back")
    assert back.status_code == 200 and step_of(back.text) == "decide"
    form = form_with(back.text, "pin")
    for name, value in typed:
        assert form.value(name) == value, name


def test_a_decision_keeps_when_its_wizard_was_opened_and_what_it_was_made_on(
    operator: Console, world: dict[str, Any]
) -> None:
    """Issue 43: the deciding clock starts when the wizard is opened (the waiting clock ends
    there), signed into the pin with the task's last error code and since when it waited, and
    all of it goes with the decision into the console's record and insight's fact."""
    task_id = world["tasks"]["needs_review"]
    path = f"/tasks/{task_id}/review"
    parked_at = LedgerTask.objects.get(id=task_id).updated_at
    before = datetime.now(UTC)
    page = operator.get(path)
    opened_by = datetime.now(UTC)
    page = wizard_post(operator, path, page.text, REVIEW_CHECKS)
    page = wizard_post(operator, path, page.text, review_values())
    submission_id = submission_id_of(wizard_submit(operator, task_id, "review", page.text))

    submission = Submission.objects.get(id=submission_id)
    assert submission.started_at is not None and before <= submission.started_at <= opened_by
    assert (submission.handler, submission.last_error_code) == (
        "object.prepare",
        "connection reset",
    )
    assert submission.waiting_since == parked_at
    fact = DecisionFact.objects.get(id=submission_id)
    assert (fact.started_at, fact.error_code) == (submission.started_at, "connection reset")
    assert fact.outcome == "failed"


# --- Review: confirm and submit -----------------------------------------------------------------


@pytest.mark.parametrize("outcome", ["FAILED", "SUCCEEDED"])
def test_review_through_the_wizard_posts_exactly_the_body_shown_RV4_AU6_I2(
    operator: Console,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    outcome: str,
) -> None:
    task_id = world["tasks"]["needs_review"]
    path = f"/tasks/{task_id}/review"
    confirm = wizard_to_confirm(
        operator, task_id, "review", review_values(outcome=outcome, result=EXACT_RESULT)
    )
    shown = pre_text(confirm.text, r'<pre id="request-body">.*?</pre>')
    assert strictjson.loads(shown) == {
        "expected_revision": "3",
        "reason": REASON,
        "evidence_ref": EVIDENCE,
        "execution_settled": True,
        "outcome": outcome,
        "result": {
            "confirmed": True,
            "sequence": 9007199254740993,
            "ratio": Decimal("0.10"),
            "hundred": 100,
            "tiny": Decimal("-0.00000015"),
        },
    }
    # Numbers as typed: exact, and spelled as written (not 1E+2).
    for number in ('"sequence": 9007199254740993', '"ratio": 0.10', '"hundred": 1e2'):
        assert number in shown
    assert '"tiny": -1.5E-7' in shown

    # Without the explicit confirmation nothing is stored or sent.
    unconfirmed = wizard_post(operator, path, confirm.text, [], nav="submit")
    assert unconfirmed.status_code == 400
    assert step_of(unconfirmed.text) == "confirm"
    assert field_errors(unconfirmed.text, "execution_settled") == ["This field is required."]
    assert pre_text(unconfirmed.text, r'<pre id="request-body">.*?</pre>') == shown
    assert not Submission.objects.filter(task_id=task_id).exists()

    answer = wizard_submit(operator, task_id, "review", unconfirmed.text)
    submission_id = submission_id_of(answer)
    page = operator.get(f"/submissions/{submission_id}")
    assert page.status_code == 200
    audit_id = text_of(element(page.text, r'<dd class="mono" id="receipt-audit-id">.*?</dd>'))
    assert "Applied" in text_of(page.text)
    # I2: the receipt page says what a receipt means.
    assert "A receipt means it was stored, not that any later work is done." in text_of(page.text)
    assert text_of(element(page.text, r'<dd id="receipt-deduplicated">.*?</dd>')).startswith("no")

    # The stored request is the body shown, and it is what the API received.
    submission = Submission.objects.get(id=submission_id)
    assert submission.body == shown
    assert (submission.action, submission.task_id) == ("review", task_id)
    assert submission.expected_revision == "3"
    assert (submission.state, submission.audit_id, submission.deduplicated) == (
        "succeeded",
        audit_id,
        False,
    )
    key_digest = hashlib.sha256(submission.idempotency_key.encode()).hexdigest()
    record = IdempotencyRecord.objects.get(key_digest=key_digest, task_id=task_id)
    canonical = strictjson.canonical(strictjson.loads(submission.body))
    assert record.request_digest == hashlib.sha256(canonical.encode()).hexdigest()
    assert record.audit_id == audit_id

    # The platform's audit names this person (AU6) and holds what was typed.
    [audit] = audits(task_id, "task.review")
    assert audit.id == audit_id
    credential = OrbitCredential.objects.get(user=people["operator"].user)
    assert audit.actor_id == credential.actor_id
    detail = api.get(
        f"/v1/tasks/{task_id}/operations/{audit_id}", headers=bearer(world["tokens"]["auditor"])
    ).json()["data"]
    assert (detail["actor_id"], detail["reason"], detail["evidence_ref"]) == (
        credential.actor_id,
        REASON,
        EVIDENCE,
    )
    raw_result = strictjson.parse_object(submission.body.encode())["result"].raw
    expected_digest = "sha256:" + hashlib.sha256(raw_result.encode()).hexdigest()
    assert detail["after"]["result_digest"] == expected_digest

    # The task as the API has it now.
    task = get_task(api, task_id, world["tokens"]["admin"])
    data = strictjson.loads(task.text)["data"]
    assert (data["state"], data["revision"]) == (outcome, "4")
    assert data["result"]["sequence"] == 9007199254740993
    assert [str(data["result"][name]) for name in ("ratio", "hundred", "tiny")] == [
        "0.10",
        "1e2",
        "-1.5E-7",
    ]


def test_a_large_result_within_256_KiB_is_accepted_by_the_api_RV3_O5(
    operator: Console, api: httpx.Client, world: dict[str, Any]
) -> None:
    """What the wizard accepts, the API must accept: the result goes out no larger than typed
    (pretty-printing a large array would multiply it past 256 KiB and the 512 KiB body)."""
    task_id = world["tasks"]["needs_review"]
    items = 100_000
    result = "[" + ",".join(["1"] * items) + "]"  # 199 999 bytes, compact as typed
    assert len(result) < 256 * 1024
    confirm = wizard_to_confirm(operator, task_id, "review", review_values(result=result))
    shown = pre_text(confirm.text, r'<pre id="request-body">.*?</pre>')
    submission_id = submission_id_of(wizard_submit(operator, task_id, "review", confirm.text))
    submission = Submission.objects.get(id=submission_id)
    assert submission.body == shown
    assert submission.state == "succeeded", (submission.error_code, submission.error_message)
    data = strictjson.loads(get_task(api, task_id, world["tokens"]["admin"]).text)["data"]
    assert data["result"] == [1] * items and data["revision"] == "4"


# --- Retry --------------------------------------------------------------------------------------


def local(moment: datetime, zone: ZoneInfo) -> str:
    return moment.astimezone(zone).strftime("%Y-%m-%dT%H:%M:%S")


@pytest.mark.parametrize(
    ("typed", "field", "message"),
    [
        ({"budget_value": "5", "budget_unit": "s"}, "budget_value", "at least the attempt timeout"),
        ({"budget_value": "31", "budget_unit": "d"}, "budget_value", "at most 30 days"),
        ({"budget_value": "0", "budget_unit": "s"}, "budget_value", "greater than or equal to 1"),
        ({"available_at": "past"}, "available_at", "must not be in the past"),
        ({"available_at": "+2h", "start_deadline_at": "+1h"}, "start_deadline_at", "before"),
        ({"start_deadline_at": "past"}, "start_deadline_at", "must be in the future"),
        ({"available_at": "+2h", "budget_value": "1", "budget_unit": "h"}, "available_at", ""),
        ({"available_at": "not a time"}, "available_at", "Enter a valid date/time."),
        ({"evidence_ref": "a b"}, "evidence_ref", "must not contain whitespace"),
    ],
    ids=[
        "budget-below-attempt-timeout",
        "budget-over-30-days",
        "budget-zero",
        "start-in-the-past",
        "deadline-before-start",
        "deadline-in-the-past",
        "start-after-budget",
        "not-a-time",
        "evidence-spaces",
    ],
)
def test_retry_decide_explains_each_mistake_inline_RT2_RT3(
    unchanged_world: tuple[dict[str, Any], Console],
    live_db: None,
    typed: dict[str, str],
    field: str,
    message: str,
) -> None:
    world, operator = unchanged_world
    task_id = world["tasks"]["failed"]
    page = to_decide(operator, task_id, "retry")
    assert "at least the attempt timeout (10 s)" in text_of(page.text)
    now = datetime.now(UTC)
    moments = {
        "past": now - timedelta(hours=1),
        "+1h": now + timedelta(hours=1),
        "+2h": now + timedelta(hours=2),
    }
    values = dict(retry_values(budget_value="1", budget_unit="d"))
    for name, value in typed.items():
        values[name] = local(moments[value], ZoneInfo("UTC")) if value in moments else value
    answer = wizard_post(operator, f"/tasks/{task_id}/retry", page.text, list(values.items()))
    assert answer.status_code == 400, text_of(answer.text)
    assert step_of(answer.text) == "decide"
    errors = field_errors(answer.text, field)
    assert errors and message in " ".join(errors), errors
    form = form_with(answer.text, "pin")
    for name, value in values.items():
        assert form.value(name) == value, name
    assert not Submission.objects.filter(task_id=task_id).exists()


def test_retry_budget_equal_to_the_attempt_timeout_is_accepted_RT2(
    operator: Console, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["failed"]
    confirm = wizard_to_confirm(
        operator, task_id, "retry", retry_values(budget_value="10", budget_unit="s")
    )
    body = strictjson.loads(pre_text(confirm.text, r'<pre id="request-body">.*?</pre>'))
    assert body["task_timeout_ms"] == 10_000
    assert "available_at" not in body and "start_deadline_at" not in body


def test_retry_times_typed_in_local_time_are_sent_in_utc_RT3(
    orbit_server: DaphneServer,
    api: httpx.Client,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    shanghai = ZoneInfo("Asia/Shanghai")
    start = (datetime.now(UTC) + timedelta(hours=1)).replace(microsecond=0)
    deadline = start + timedelta(hours=1, minutes=30)
    task_id = world["tasks"]["failed"]
    with signed_in(orbit_server.url, people["operator"]) as console:
        console.http.cookies.set("orbit_tz", "Asia/Shanghai", domain="127.0.0.1")
        typed = retry_values(
            budget_value="30",
            budget_unit="d",
            available_at=local(start, shanghai),
            start_deadline_at=local(deadline, shanghai)[:16],  # minutes only, as browsers send
        )
        decide = to_decide(console, task_id, "retry")
        assert "Times are in your time zone (Asia/Shanghai)" in text_of(decide.text)
        confirm = wizard_post(console, f"/tasks/{task_id}/retry", decide.text, typed)
        assert step_of(confirm.text) == "confirm", text_of(confirm.text)
        shown = pre_text(confirm.text, r'<pre id="request-body">.*?</pre>')
        submission_id = submission_id_of(wizard_submit(console, task_id, "retry", confirm.text))
        page = console.get(f"/submissions/{submission_id}")

    utc_start = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    utc_deadline = deadline.replace(second=0).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert local(start, shanghai) != local(start, ZoneInfo("UTC"))  # eight hours apart
    body = strictjson.loads(shown)
    assert body == {
        "expected_revision": "3",
        "reason": "The earlier execution has ended; running it again is safe",
        "evidence_ref": "evidence:safe-retry-001",
        "safe_to_retry": True,
        "task_timeout_ms": 30 * 86_400_000,
        "available_at": utc_start,
        "start_deadline_at": utc_deadline,
    }
    assert Submission.objects.get(id=submission_id).body == shown
    new_task = re.search(r'id="receipt-new-task" href="/tasks/([0-9a-f]{32})"', page.text)
    assert new_task is not None
    data = get_task(api, new_task.group(1), world["tokens"]["admin"]).json()["data"]
    assert (data["available_at"], data["start_deadline_at"]) == (utc_start, utc_deadline)


def test_retry_through_the_wizard_creates_the_linked_task_RT4_RT5(
    operator: Console, api: httpx.Client, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    source = world["tasks"]["cancelled"]
    confirm = wizard_to_confirm(operator, source, "retry", retry_values(budget_value="15"))
    unconfirmed = wizard_post(operator, f"/tasks/{source}/retry", confirm.text, [], nav="submit")
    assert unconfirmed.status_code == 400
    assert field_errors(unconfirmed.text, "safe_to_retry") == ["This field is required."]
    submission_id = submission_id_of(wizard_submit(operator, source, "retry", unconfirmed.text))
    page = operator.get(f"/submissions/{submission_id}")
    assert "Applied" in text_of(page.text)
    link = re.search(r'id="receipt-new-task" href="/tasks/([0-9a-f]{32})"', page.text)
    assert link is not None
    new_id = link.group(1)
    submission = Submission.objects.get(id=submission_id)
    assert (submission.http_status, submission.result_task_id) == (201, new_id)
    assert submission.expected_revision == "2"
    assert strictjson.loads(submission.body)["task_timeout_ms"] == 15 * 60_000

    new_page = operator.get(f"/tasks/{new_id}")
    chain = element(new_page.text, r'<nav class="callout info" aria-label="Retry chain">.*?</nav>')
    assert f'href="/tasks/{source}"' in chain and "manual retry of" in text_of(chain)
    data = get_task(api, new_id, world["tokens"]["admin"]).json()["data"]
    assert (data["retry_of"], data["state"], data["revision"]) == (source, "WAITING", "1")
    [audit] = audits(source, "task.retry")
    assert audit.id == submission.audit_id
    assert audit.actor_id == OrbitCredential.objects.get(user=people["operator"].user).actor_id
    source_data = get_task(api, source, world["tokens"]["admin"]).json()["data"]
    assert (source_data["state"], source_data["revision"]) == ("CANCELLED", "2")


# --- Races and stale decisions ------------------------------------------------------------------


def test_stale_revision_shows_state_conflict_beside_the_current_task_RV1_I6(
    operator: Console, api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    confirm = wizard_to_confirm(operator, task_id, "review", review_values())
    assert review(api, world, outcome="SUCCEEDED").status_code == 200  # someone else, first

    submission_id = submission_id_of(wizard_submit(operator, task_id, "review", confirm.text))
    page = operator.get(f"/submissions/{submission_id}")
    text = text_of(page.text)
    assert "Rejected" in text and "409 STATE_CONFLICT" in text
    assert "someone else decided first" in text
    current = element(page.text, r'<dl class="facts" id="current-task">.*?</dl>')
    assert text_of(element(current, r'<dd class="mono" id="current-revision">.*?</dd>')) == "4"
    assert "SUCCEEDED" in text_of(current)
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.error_code, submission.http_status) == (
        "rejected",
        "STATE_CONFLICT",
        409,
    )
    assert submission.expected_revision == "3"  # never refreshed into another decision (I6)
    assert len(audits(task_id, "task.review")) == 1


def test_a_task_that_moved_while_deciding_is_flagged_in_the_wizard(
    operator: Console, api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    page = to_decide(operator, task_id, "review")
    assert review(api, world).status_code == 200
    answer = wizard_post(operator, f"/tasks/{task_id}/review", page.text, review_values())
    assert answer.status_code == 200
    assert "The task changed while you were deciding." in text_of(answer.text)
    assert "You began at revision 3; it is now at revision 4 (FAILED)" in text_of(answer.text)


def test_double_submit_makes_one_submission_and_one_audit_record(
    operator: Console, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    confirm = wizard_to_confirm(operator, task_id, "review", review_values())
    first = wizard_submit(operator, task_id, "review", confirm.text)
    second = wizard_submit(operator, task_id, "review", confirm.text)
    assert submission_id_of(first) == submission_id_of(second)
    assert Submission.objects.filter(task_id=task_id).count() == 1
    assert Submission.objects.get(task_id=task_id).send_count == 1
    assert len(audits(task_id, "task.review")) == 1
    page = operator.get(second.headers["location"])
    assert "had already been submitted" in text_of(page.text)
    assert "Applied" in text_of(page.text)


def test_two_people_deciding_the_same_revision_make_one_submission(
    orbit_server: DaphneServer,
    orbit_server_2: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    task_id = world["tasks"]["needs_review"]
    with (
        signed_in(orbit_server.url, people["operator"]) as operator,
        signed_in(orbit_server_2.url, people["supervisor"]) as supervisor,
    ):
        confirms = [
            wizard_to_confirm(operator, task_id, "review", review_values(outcome="FAILED")),
            wizard_to_confirm(supervisor, task_id, "review", review_values(outcome="SUCCEEDED")),
        ]
        with ThreadPoolExecutor(max_workers=2) as pool:
            answers = list(
                pool.map(
                    lambda pair: wizard_submit(pair[0], task_id, "review", pair[1].text),
                    zip([operator, supervisor], confirms, strict=True),
                )
            )
        ids = {submission_id_of(answer) for answer in answers}
        assert len(ids) == 1
        [submission] = Submission.objects.filter(task_id=task_id)
        assert submission.id in ids
        deciders = {people["operator"].user.pk, people["supervisor"].user.pk}
        assert submission.created_by_id in deciders
        assert submission.state == "succeeded"
        assert len(audits(task_id, "task.review")) == 1
        # Whoever lost is told plainly, on the one submission's page, that their decision was
        # not sent, and sees it beside the one that stands (issue 15); the winner is not.
        operator_won = submission.created_by_id == people["operator"].user.pk
        loser, winner = (supervisor, operator) if operator_won else (operator, supervisor)
        lost_outcome, won_outcome = (
            ("SUCCEEDED", "FAILED") if operator_won else ("FAILED", "SUCCEEDED")
        )
        told = loser.get(f"/submissions/{submission.id}").text
        assert "Your decision was not sent" in text_of(
            element(told, r'<section[^>]*id="set-aside".*?</section>')
        )
        mine = strictjson.loads(pre_text(told, r'<pre id="set-aside-mine">.*?</pre>'))
        standing = strictjson.loads(pre_text(told, r'<pre id="set-aside-standing">.*?</pre>'))
        assert (mine["outcome"], standing["outcome"]) == (lost_outcome, won_outcome)
        assert mine["reason"] == review_values()[2][1]  # what they typed is kept
        assert standing == strictjson.loads(submission.body)
        assert 'id="set-aside"' not in winner.get(f"/submissions/{submission.id}").text


# --- Who may use the wizards --------------------------------------------------------------------


def test_auditor_gets_403_from_the_wizards_on_get_and_post(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    with signed_in(orbit_server.url, people["auditor"]) as auditor:
        token = form_with(auditor.get("/").text, "csrfmiddlewaretoken").value("csrfmiddlewaretoken")
        assert token
        for task, action in (("needs_review", "review"), ("failed", "retry")):
            path = f"/tasks/{world['tasks'][task]}/{action}"
            assert auditor.get(path).status_code == 403, path
            answer = auditor.post(path, [("csrfmiddlewaretoken", token), *REVIEW_CHECKS])
            assert answer.status_code == 403, path
    assert not Submission.objects.filter(task_id=world["tasks"]["needs_review"]).exists()


def test_wizard_for_an_unavailable_action_says_why(
    operator: Console, world: dict[str, Any]
) -> None:
    for task, action, reason in (
        ("succeeded", "retry", "never"),
        ("failed_uncertain", "retry", "uncertain"),
        ("needs_review_workflow", "review", "workflow"),
        ("needs_review_leased", "review", "lease"),
        ("failed", "review", "NEEDS_REVIEW"),
    ):
        page = operator.get(f"/tasks/{world['tasks'][task]}/{action}")
        assert page.status_code == 409, task
        assert reason in text_of(page.text), task
        assert 'name="pin"' not in page.text


def test_a_workflow_task_in_review_is_left_to_its_workflows_controller_I5_RV2(
    operator: Console, world: dict[str, Any]
) -> None:
    """I5: a workflow's NEEDS_REVIEW task is recovered in the workflow's order (instance, step,
    tasks and evidence read; one decision; ContinueWorkflow, then Resume) by its controller, not
    by a review of the task alone (RV2 refuses one). The console lists and shows the task, says
    who recovers it, and offers no wizard that could send a review."""
    task_id = world["tasks"]["needs_review_workflow"]
    page = operator.get(f"/tasks/{task_id}")
    assert page.status_code == 200
    assert "The task belongs to a workflow; its controller must recover it." in text_of(page.text)
    assert f'href="/tasks/{task_id}/review"' not in page.text
    wizard = operator.get(f"/tasks/{task_id}/review")
    assert wizard.status_code == 409 and 'name="pin"' not in wizard.text
    assert not Submission.objects.filter(task_id=task_id).exists()


def person_without_credential(role: str) -> TestPerson:
    username = f"nocred-{role}-{secrets.token_hex(4)}"
    password = "a-long-password-for-tests"
    user = User.objects.create_user(username=username, password=password)
    user.groups.set([Group.objects.get_or_create(name=role)[0]])
    return TestPerson(username=username, password=password, user=user, roles=frozenset([role]))


def test_person_without_a_credential_gets_the_no_credential_page(
    orbit_server: DaphneServer, world: dict[str, Any]
) -> None:
    person = person_without_credential("operator")
    task_id = world["tasks"]["needs_review"]
    with signed_in(orbit_server.url, person) as console:
        for path in ("/", f"/tasks/{task_id}", f"/tasks/{task_id}/review"):
            page = console.get(path)
            assert page.status_code == 403, path
            assert "You have no Orbit credential yet" in text_of(page.text), path
            assert "manage.py console user" in text_of(page.text), path
            # Issue 31: exactly what to ask for (the permissions of the person's roles).
            assert (
                f"manage.py console user {person.username} --role operator --token-file PATH"
                in text_of(page.text)
            ), path
            assert "tasks:read" in text_of(page.text), path


def test_a_form_error_is_an_answer_not_a_warning_in_the_log(
    unchanged_world: tuple[dict[str, Any], Console], orbit_server: DaphneServer
) -> None:
    """Issue 30: every form error logged a WARNING line ("Bad Request: ..."), so the demo's
    terminal and an operator's alerts filled with people's typing mistakes."""
    world, operator = unchanged_world
    task_id = world["tasks"]["needs_review"]
    page = to_decide(operator, task_id, "review")
    before = len(orbit_server.log_text())
    values = {"outcome": "SUCCEEDED", "result": "{}", "reason": "   ", "evidence_ref": "e:1"}
    answer = wizard_post(operator, f"/tasks/{task_id}/review", page.text, list(values.items()))
    assert answer.status_code == 400
    deadline = time.monotonic() + 5
    mentioned: list[dict[str, Any]] = []
    while time.monotonic() < deadline and not mentioned:
        lines = orbit_server.log_text()[before:].splitlines()
        records = [json.loads(line) for line in lines if line.startswith("{")]
        mentioned = [r for r in records if task_id in str(r.get("message", ""))]
        time.sleep(0.1)
    assert mentioned, "the answer is logged (at INFO)"
    assert [r["level"] for r in mentioned] == ["INFO"], mentioned
