"""Durable submissions (C9, I1, I6) with a console whose calls to the recovery API go through a
proxy that loses things on purpose: the request unsent, or the API's answer lost after it
committed. Each ends, by a person's resend or by the reconciler, in exactly one platform audit
record and the original receipt; the stored request never changes."""

import re
import secrets
import signal
import subprocess
import sys
import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.utils import timezone

from orbit_console.decisions.models import ConsoleEvent, Proposal, ProposalState, Submission
from orbit_console.decisions.proposals import proposal_create
from orbit_console.ledger import lifecycle
from orbit_console.ledger.models import OperationAudit, Task, TaskState
from orbit_console.lib import strictjson
from tests.audit.conftest import statements_refused
from tests.console.web import (
    Console,
    csrf_token_of,
    element,
    forms_of,
    pre_text,
    retry_values,
    review_values,
    signed_in,
    submission_id_of,
    text_of,
    wizard_submit,
    wizard_to_confirm,
)
from tests.support import servers
from tests.support.orbit import get_task, review
from tests.support.people import TestPerson, make_person
from tests.support.proxy import FaultyProxy
from tests.support.servers import DaphneServer

REQUEST_FIELDS = (
    "id",
    "action",
    "task_id",
    "expected_revision",
    "idempotency_key",
    "body",
    "created_by_id",
    "sent_as_id",
    "created_at",
)


@pytest.fixture
def operator(proxied_console: DaphneServer, people: dict[str, TestPerson]) -> Any:
    with signed_in(proxied_console.url, people["operator"]) as console:
        yield console


def request_of(submission_id: str) -> dict[str, Any]:
    """What a submission asks for: stored before the first send, never changed (I1)."""
    submission = Submission.objects.get(id=submission_id)
    return {name: getattr(submission, name) for name in REQUEST_FIELDS}


def audits(task_id: str, action: str = "task.review") -> list[OperationAudit]:
    return list(OperationAudit.objects.filter(task_id=task_id, action=action))


def submit_while(
    console: Console, proxy: FaultyProxy, task_id: str, action: str, mode: str
) -> tuple[str, str]:
    """Walk the wizard with the API reachable, then submit while the proxy is in ``mode``.
    Returns the submission's id and the body the confirm step showed."""
    values = review_values() if action == "review" else retry_values()
    confirm = wizard_to_confirm(console, task_id, action, values)
    shown = pre_text(confirm.text, r'<pre id="request-body">.*?</pre>')
    proxy.set_mode(mode)
    try:
        submission_id = submission_id_of(wizard_submit(console, task_id, action, confirm.text))
    finally:
        proxy.set_mode("pass")
    return submission_id, shown


def resend(console: Console, page_html: str) -> httpx.Response:
    """Press the page's "send the identical request again" button."""
    [form] = [form for form in forms_of(page_html) if form.action.endswith("/resend")]
    return console.post(form.action, form.fields)


def receipt(html: str) -> tuple[str, str]:
    """The receipt on a submission's page: audit id and the deduplicated answer."""
    audit_id = text_of(element(html, r'<dd class="mono" id="receipt-audit-id">.*?</dd>'))
    deduplicated = text_of(element(html, r'<dd id="receipt-deduplicated">.*?</dd>'))
    return audit_id, deduplicated.split(" ")[0]


def run_reconciler(api_url: str) -> str:
    """``manage.py reconcile --once`` as the service runs it: its own process, same database."""
    done = servers.run_manage(
        "reconcile", "--once", env=servers.child_env(ORBIT_EMBEDDED_API_URL=api_url)
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


# --- (a) The request never reached the API ------------------------------------------------------


def test_unsent_request_is_unknown_then_resent_identically_C9_I1(
    operator: Console, faulty_proxy: FaultyProxy, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    submission_id, shown = submit_while(operator, faulty_proxy, task_id, "review", "refuse_writes")
    assert any(":review" in line and task_id in line for line in faulty_proxy.refused)

    page = operator.get(f"/submissions/{submission_id}")
    assert page.status_code == 200
    assert "Outcome unknown" in text_of(page.text)
    assert "Sending the identical request again is safe" in text_of(page.text)
    stored = request_of(submission_id)
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.send_count) == ("unknown", 1)
    assert submission.body == shown
    assert submission.idempotency_key
    assert audits(task_id) == []  # nothing reached the platform
    queue = operator.get("/")
    waiting = element(queue.text, r'<div class="callout warning">.*?</div>')
    assert f"/submissions/{submission_id}" in waiting

    answer = resend(operator, page.text)
    assert answer.status_code == 303
    assert answer.headers["location"] == f"/submissions/{submission_id}"
    page = operator.get(answer.headers["location"])
    audit_id, deduplicated = receipt(page.text)
    assert deduplicated == "no"
    [audit] = audits(task_id)
    assert audit.id == audit_id
    assert request_of(submission_id) == stored
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.send_count, submission.deduplicated) == (
        "succeeded",
        2,
        False,
    )
    assert "resend" not in page.text  # a definite answer: nothing left to send


# --- (b) The API committed, its answer was lost -------------------------------------------------


def test_lost_answer_is_reconciled_to_the_original_receipt_C7_C9(
    operator: Console, faulty_proxy: FaultyProxy, api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    submission_id, _shown = submit_while(operator, faulty_proxy, task_id, "review", "drop_writes")
    assert any(task_id in line for line in faulty_proxy.dropped)

    page = operator.get(f"/submissions/{submission_id}")
    assert "Outcome unknown" in text_of(page.text)
    assert Submission.objects.get(id=submission_id).state == "unknown"
    [committed] = audits(task_id)  # the platform did apply it
    stored = request_of(submission_id)
    data = get_task(api, task_id, world["tokens"]["admin"]).json()["data"]
    assert (data["state"], data["revision"]) == ("FAILED", "4")

    page = operator.get(resend(operator, page.text).headers["location"])
    audit_id, deduplicated = receipt(page.text)
    assert (audit_id, deduplicated) == (committed.id, "yes")
    assert [audit.id for audit in audits(task_id)] == [committed.id]
    assert request_of(submission_id) == stored
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.audit_id, submission.deduplicated) == (
        "succeeded",
        committed.id,
        True,
    )


# --- (c) The reconciler -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["refuse_writes", "drop_writes"])
def test_reconciler_resends_an_unknown_submission_to_its_receipt_C9_I4(
    operator: Console,
    faulty_proxy: FaultyProxy,
    orbit_server: DaphneServer,
    world: dict[str, Any],
    mode: str,
) -> None:
    task_id = world["tasks"]["needs_review"]
    submission_id, _shown = submit_while(operator, faulty_proxy, task_id, "review", mode)
    stored = request_of(submission_id)
    committed = [audit.id for audit in audits(task_id)]
    assert len(committed) == (1 if mode == "drop_writes" else 0)
    Submission.objects.filter(id=submission_id).update(
        next_attempt_at=timezone.now() - timedelta(seconds=5)
    )

    run_reconciler(orbit_server.url)

    submission = Submission.objects.get(id=submission_id)
    assert submission.state == "succeeded", (submission.error_code, submission.error_message)
    [audit] = audits(task_id)
    assert submission.audit_id == audit.id
    if mode == "drop_writes":
        assert (audit.id, submission.deduplicated) == (committed[0], True)
    else:
        assert submission.deduplicated is False
    assert submission.send_count == 2
    assert request_of(submission_id) == stored
    resent = ConsoleEvent.objects.get(submission_id=submission_id, kind="submission.resent")
    assert resent.actor_id is None  # the reconciler, not a person
    page = operator.get(f"/submissions/{submission_id}")
    assert receipt(page.text)[0] == audit.id


# --- (d) 429: try again later -------------------------------------------------------------------


def test_queue_full_shows_when_to_try_again_and_the_same_request_succeeds_later_RT7(
    operator: Console, faulty_proxy: FaultyProxy, world: dict[str, Any]
) -> None:
    source = world["tasks"]["queue_full_failed"]
    submission_id, _shown = submit_while(operator, faulty_proxy, source, "retry", "pass")
    page = operator.get(f"/submissions/{submission_id}")
    text = text_of(page.text)
    assert "Not applied yet" in text
    assert "Send the same request again after" in text
    assert "QUEUE_FULL" in text
    alert = element(page.text, r'<div class="callout warning" role="alert">.*?</div>')
    assert re.search(r'<time datetime="\d{4}-\d\d-\d\dT[^"]+Z"', alert)  # when to try again
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.http_status, submission.error_code) == (
        "retry_later",
        429,
        "QUEUE_FULL",
    )
    assert submission.next_attempt_at is not None
    assert audits(source, "task.retry") == []
    stored = request_of(submission_id)

    # Free one place in the full queue: cancel one of the tasks waiting there.
    full_queue = Task.objects.get(id=source).queue_id
    waiting = Task.objects.filter(queue_id=full_queue, state=TaskState.WAITING).first()
    assert waiting is not None
    lifecycle.task_cancel(task=waiting, actor_id=waiting.id, reason="make room for the retry")

    page = operator.get(resend(operator, page.text).headers["location"])
    audit_id, deduplicated = receipt(page.text)
    assert deduplicated == "no"
    new_task = re.search(r'id="receipt-new-task" href="/tasks/([0-9a-f]{32})"', page.text)
    assert new_task is not None
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.http_status, submission.result_task_id) == (
        "succeeded",
        201,
        new_task.group(1),
    )
    assert [audit.id for audit in audits(source, "task.retry")] == [audit_id]
    assert request_of(submission_id) == stored
    assert Task.objects.get(id=new_task.group(1)).retry_of == source


# --- (e) The reconciler's deadline --------------------------------------------------------------


def test_reconciler_stops_at_the_deadline_and_leaves_it_to_a_person(
    operator: Console,
    faulty_proxy: FaultyProxy,
    orbit_server: DaphneServer,
    world: dict[str, Any],
) -> None:
    task_id = world["tasks"]["needs_review"]
    submission_id, _shown = submit_while(operator, faulty_proxy, task_id, "review", "refuse_writes")
    past = timezone.now() - timedelta(minutes=1)
    Submission.objects.filter(id=submission_id).update(
        reconcile_deadline=past, next_attempt_at=past
    )
    stored = request_of(submission_id)

    run_reconciler(orbit_server.url)

    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.send_count, submission.next_attempt_at) == (
        "unknown",
        1,
        None,
    )
    assert audits(task_id) == []  # not resent
    stopped = ConsoleEvent.objects.filter(
        submission_id=submission_id, kind="submission.reconcile_stopped"
    )
    assert stopped.count() == 1
    page = operator.get(f"/submissions/{submission_id}")
    assert "The reconciler has stopped trying" in text_of(page.text)

    # A second pass does not stop it twice; the person can still resend.
    run_reconciler(orbit_server.url)
    assert stopped.count() == 1
    page = operator.get(resend(operator, page.text).headers["location"])
    assert receipt(page.text)[1] == "no"
    assert request_of(submission_id) == stored


# --- (f) Who may resend -------------------------------------------------------------------------


def test_only_the_sender_may_resend(
    operator: Console,
    faulty_proxy: FaultyProxy,
    proxied_console: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    task_id = world["tasks"]["needs_review"]
    submission_id, _shown = submit_while(operator, faulty_proxy, task_id, "review", "refuse_writes")
    path = f"/submissions/{submission_id}"
    others = {
        "another operator": make_person(world, "operator"),
        "supervisor": people["supervisor"],
        "auditor": people["auditor"],
    }
    for name, person in others.items():
        with signed_in(proxied_console.url, person) as other:
            page = other.get(path)
            assert page.status_code == 200, name
            assert not [form for form in forms_of(page.text) if form.action.endswith("/resend")]
            token = csrf_token_of(page.text)
            refused = other.post(f"{path}/resend", [("csrfmiddlewaretoken", token)])
            assert refused.status_code == 403, name
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.send_count) == ("unknown", 1)
    assert audits(task_id) == []

    page = operator.get(path)
    page = operator.get(resend(operator, page.text).headers["location"])
    assert "Applied" in text_of(page.text)


# --- (g) The stored request never changes -------------------------------------------------------


def test_request_fields_never_change_across_sends_I1_I6(
    operator: Console, faulty_proxy: FaultyProxy, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    submission_id, shown = submit_while(operator, faulty_proxy, task_id, "review", "refuse_writes")
    path = f"/submissions/{submission_id}"
    stored = request_of(submission_id)
    assert stored["body"] == shown
    assert stored["expected_revision"] == "3"
    assert strictjson.loads(stored["body"])["expected_revision"] == "3"
    refused_before = len(faulty_proxy.refused)

    # Still unreachable: the resend is refused too, and the outcome stays unknown.
    faulty_proxy.set_mode("refuse_writes")
    answer = resend(operator, operator.get(path).text)
    faulty_proxy.set_mode("pass")
    assert answer.status_code == 303
    assert len(faulty_proxy.refused) == refused_before + 1
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.send_count) == ("unknown", 2)
    assert request_of(submission_id) == stored

    # Reachable again: the same request is applied.
    page = operator.get(path)
    answer = resend(operator, page.text)
    page = operator.get(answer.headers["location"])
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.send_count) == ("succeeded", 3)
    assert request_of(submission_id) == stored

    # After a definite answer, resending changes nothing.
    token = csrf_token_of(page.text)
    again = operator.post(f"{path}/resend", [("csrfmiddlewaretoken", token)])
    assert again.status_code == 303
    assert "already has a definite answer" in text_of(operator.get(path).text)
    submission = Submission.objects.get(id=submission_id)
    assert submission.send_count == 3
    assert request_of(submission_id) == stored
    assert len(audits(task_id)) == 1


def test_resend_after_someone_else_decided_is_a_definite_conflict_I6(
    operator: Console, faulty_proxy: FaultyProxy, api: httpx.Client, world: dict[str, Any]
) -> None:
    """The identical request is resent, never refreshed into a decision at the new revision."""
    task_id = world["tasks"]["needs_review"]
    submission_id, _shown = submit_while(operator, faulty_proxy, task_id, "review", "refuse_writes")
    stored = request_of(submission_id)
    assert review(api, world, outcome="SUCCEEDED").status_code == 200  # someone else, meanwhile

    page = operator.get(
        resend(operator, operator.get(f"/submissions/{submission_id}").text).headers["location"]
    )
    text = text_of(page.text)
    assert "Rejected" in text and "409 STATE_CONFLICT" in text
    current = element(page.text, r'<dl class="facts" id="current-task">.*?</dl>')
    assert text_of(element(current, r'<dd class="mono" id="current-revision">.*?</dd>')) == "4"
    submission = Submission.objects.get(id=submission_id)
    assert (submission.state, submission.error_code) == ("rejected", "STATE_CONFLICT")
    assert request_of(submission_id) == stored
    assert len(audits(task_id)) == 1  # only the other decision


def test_while_the_api_is_down_only_the_submitter_still_sees_a_submission(
    operator: Console,
    proxied_console: DaphneServer,
    faulty_proxy: FaultyProxy,
    world: dict[str, Any],
    settings: Any,
) -> None:
    """Issue 13: who may see a submission is the API's answer (console/access.py). With no
    answer, the console fails closed (503), except for the person who made the decision, who
    still sees it and how to send it again."""
    task_id = world["tasks"]["needs_review"]
    submission_id, _ = submit_while(operator, faulty_proxy, task_id, "review", "refuse_writes")
    colleague = make_person(world, "operator")
    faulty_proxy.set_mode("down")
    try:
        time.sleep(settings.CONSOLE_ACCESS_SECONDS)  # the answers given before have aged out
        mine = operator.get(f"/submissions/{submission_id}")
        with signed_in(proxied_console.url, colleague) as other:
            theirs = other.get(f"/submissions/{submission_id}")
    finally:
        faulty_proxy.set_mode("pass")
    assert mine.status_code == 200
    assert "Send the identical request again" in text_of(mine.text)
    assert theirs.status_code == 503
    reason = strictjson.loads(Submission.objects.get(id=submission_id).body)["reason"]
    assert reason in text_of(mine.text) and reason not in text_of(theirs.text)


def test_unreachable_api_is_explained_on_read_pages(
    operator: Console, faulty_proxy: FaultyProxy, world: dict[str, Any]
) -> None:
    faulty_proxy.set_mode("down")
    page = operator.get(f"/tasks/{world['tasks']['needs_review']}")
    assert page.status_code == 503
    assert "The recovery API did not answer" in text_of(page.text)
    assert "Nothing on this page was changed" in text_of(page.text)
    faulty_proxy.set_mode("pass")
    assert operator.get(f"/tasks/{world['tasks']['needs_review']}").status_code == 200


# --- (f) The reconciler outlives its faults (issue 14) -----------------------------------------


def test_the_reconciler_outlives_a_failing_pass_and_catches_up_by_itself(
    world: dict[str, Any], people: dict[str, TestPerson], orbit_server: DaphneServer, tmp_path: Any
) -> None:
    """A pass that fails on a database error (here a trigger refuses the proposal's expiry) no
    longer kills the service: it logs the fault, waits a little longer each time, and once the
    fault is gone does what was due, without a restart."""
    proposal = proposal_create(
        action="review",
        task_id=world["tasks"]["needs_review_2"],
        queue_id=world["queue_id"],
        namespace_id=world["namespace_id"],
        expected_revision="3",
        body="{}",
        proposed_by=people["operator"].user,
    ).proposal
    Proposal.objects.filter(id=proposal.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    log = tmp_path / "reconciler.log"
    port, token = servers.free_port(), secrets.token_urlsafe(16)
    health = f"http://127.0.0.1:{port}"
    with statements_refused("console_proposal", "UPDATE", "proposals unavailable (test)"):
        with log.open("w") as out:
            reconciler = subprocess.Popen(
                [
                    *(sys.executable, "manage.py", "reconcile", "--interval", "0.1"),
                    *("--health-port", str(port)),
                ],
                cwd=settings.BASE_DIR,
                env=servers.child_env(ORBIT_EMBEDDED_API_URL=orbit_server.url, METRICS_TOKEN=token),
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        try:
            deadline = time.monotonic() + 60
            while log.read_text().count("a pass failed") < 3:
                assert reconciler.poll() is None, log.read_text()
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.1)
            assert "proposals unavailable (test)" in log.read_text()
            # Its heartbeat: failed passes counted, none succeeded yet, not stalled yet.
            assert loop_failures(health, token) >= 3
            ready = httpx.get(f"{health}/health/ready", timeout=10)
            assert ready.status_code == 200, ready.text
            assert ready.json()["last_success"] is None and ready.json()["last_error"]
        except BaseException:
            reconciler.kill()
            raise
    try:
        deadline = time.monotonic() + 40  # the backoff is at most 30 s
        while Proposal.objects.get(id=proposal.id).state != ProposalState.EXPIRED:
            assert reconciler.poll() is None, log.read_text()
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        # The pass that expired it ends (it may also send other due decisions), then beats.
        while httpx.get(f"{health}/health/ready", timeout=10).json()["last_success"] is None:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        assert httpx.get(f"{health}/metrics", timeout=10).status_code == 404  # no token
    finally:
        reconciler.send_signal(signal.SIGTERM)
        reconciler.wait(timeout=30)
    assert reconciler.returncode == 0, log.read_text()


def loop_failures(health: str, token: str) -> float:
    """``orbit_loop_failures_total{loop="reconciler"}`` from the reconciler's own /metrics."""
    metrics = httpx.get(
        f"{health}/metrics", headers={"Authorization": f"Bearer {token}"}, timeout=10
    )
    assert metrics.status_code == 200, metrics.text
    match = re.search(r'^orbit_loop_failures_total\{loop="reconciler"\} (\S+)$', metrics.text, re.M)
    assert match is not None, metrics.text
    return float(match.group(1))


# --- (g) Truthful pages when the console's own database fails (issue 14) -----------------------


def test_a_fault_after_the_decision_was_stored_says_so_and_links_to_it(
    operator: Console, world: dict[str, Any]
) -> None:
    """The decision is stored, then the database refuses to record that it is being sent: the
    person gets the styled fault page, with the request id and a link to their decision, which
    exists (pending: the reconciler will send it), instead of a bare "Server error"."""
    task_id = world["tasks"]["needs_review"]
    confirm = wizard_to_confirm(operator, task_id, "review", review_values())
    with statements_refused("console_submission", "UPDATE", "submissions unavailable (test)"):
        answer = wizard_submit(operator, task_id, "review", confirm.text)
    assert answer.status_code in {500, 503}, answer.text
    stored = element(
        answer.text, r'<div class="callout warning" id="stored-before-fault">.*?</div>'
    )
    match = re.search(r'href="/submissions/([0-9a-f]{32})"', stored)
    assert match is not None, stored
    submission = Submission.objects.get(id=match.group(1))
    assert (submission.task_id, submission.state, submission.send_count) == (task_id, "pending", 0)
    assert "Your decision was stored before this happened" in text_of(answer.text)
    request_id = text_of(element(answer.text, r'<span class="mono" id="request-id">.*?</span>'))
    assert request_id and request_id == answer.headers["X-Request-Id"]
    assert 'rel="stylesheet"' in answer.text and "<script>" not in answer.text
    assert audits(task_id) == []  # nothing reached the platform
    page = operator.get(f"/submissions/{submission.id}")
    assert page.status_code == 200 and "Decision stored" in text_of(page.text)
