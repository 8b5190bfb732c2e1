"""``/metrics`` (issue 7): Prometheus series of one console process after a review, a retry
and an outcome-unknown submission made through the console (C9), and a live timeline socket.
The endpoint exists only for a request bearing ``METRICS_TOKEN``; the reverse proxy never
routes it."""

import json
import re
import secrets
import time
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone
from prometheus_client.samples import Sample
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.typing import Origin

from orbit_console.audit import signing
from orbit_console.audit import status as audit_status
from orbit_console.audit.checkpoints import listed_message
from orbit_console.audit.metrics import AuditCollector
from orbit_console.audit.models import ChainVerification, WrittenCheckpoint
from orbit_console.decisions.metrics import SubmissionCollector
from orbit_console.decisions.models import (
    Batch,
    BatchItem,
    BatchState,
    Proposal,
    Submission,
    SubmissionState,
)
from orbit_console.decisions.submissions import submission_create
from orbit_console.events.metrics import DeliveryCollector
from orbit_console.events.models import Delivery
from orbit_console.feed.consumer import LEADERSHIP
from orbit_console.feed.gauges import FeedCollector
from orbit_console.feed.models import Leadership, Source, SourceStatus
from orbit_console.lib.ids import new_id
from orbit_console.lib.live import (
    CLOSE_UNAUTHENTICATED,
    PUBLISH_FAILURES,
    PUBLISH_LATENCY,
    publish,
    task_group,
)
from orbit_console.lib.rfc3339 import format_utc
from orbit_console.lib.scrape import ScrapeCollector
from tests.console.web import (
    Console,
    retry_values,
    review_values,
    signed_in,
    submission_id_of,
    wizard_submit,
    wizard_to_confirm,
)
from tests.ops.helpers import scrape, self_proxied_server, value, values
from tests.support.people import TestPerson
from tests.support.proxy import FaultyProxy
from tests.support.servers import DaphneServer, free_port
from tests.support.silent import silent_server

METRICS_TOKEN = secrets.token_urlsafe(24)
EVENTUALLY_SECONDS = 30  # two cores and other suites at once; never a timing assertion
LATENCY = "orbit_http_request_duration_seconds_bucket"
CALLS = "orbit_recovery_api_calls_total"
ANSWERS = "orbit_recovery_api_answers_total"
SOCKETS = "orbit_websockets_open"


@pytest.fixture(scope="module")
def metered(
    django_db_setup: None, django_db_blocker: Any
) -> Iterator[tuple[DaphneServer, FaultyProxy]]:
    env = {"METRICS_TOKEN": METRICS_TOKEN}
    with django_db_blocker.unblock(), self_proxied_server("ops-metrics", env=env) as pair:
        yield pair


def submit(console: Console, task_id: str, action: str) -> str:
    values_ = review_values() if action == "review" else retry_values()
    confirm = wizard_to_confirm(console, task_id, action, values_)
    return submission_id_of(wizard_submit(console, task_id, action, confirm.text))


def gauge_eventually(server: DaphneServer, expected: float) -> float:
    """The timeline sockets gauge once it reads ``expected`` (or its last reading)."""
    deadline = time.monotonic() + EVENTUALLY_SECONDS
    while True:
        seen = value(scrape(server, METRICS_TOKEN), SOCKETS, consumer="timeline")
        if seen == expected or time.monotonic() > deadline:
            return seen
        time.sleep(0.2)


def test_metrics_expose_every_series_after_a_review_a_retry_and_an_unknown_outcome_C9(
    metered: tuple[DaphneServer, FaultyProxy],
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    server, proxy = metered
    with signed_in(server.url, people["operator"]) as operator:
        reviewed = submit(operator, world["tasks"]["needs_review"], "review")
        retried = submit(operator, world["tasks"]["failed"], "retry")
        # The API commits the second review; its answer is lost on the way back.
        lost = world["tasks"]["needs_review_2"]
        confirm = wizard_to_confirm(operator, lost, "review", review_values())
        proxy.set_mode("drop_writes")
        try:
            answer = wizard_submit(operator, lost, "review", confirm.text)
        finally:
            proxy.set_mode("pass")
        unknown = submission_id_of(answer)
        assert operator.get(f"/submissions/{unknown}").status_code == 200
        assert operator.get("/").status_code == 200
    states = {
        submission_id: Submission.objects.get(id=submission_id).state
        for submission_id in (reviewed, retried, unknown)
    }
    assert states == {reviewed: "succeeded", retried: "succeeded", unknown: "unknown"}

    samples = scrape(server, METRICS_TOKEN)

    # Latency histograms per view: console views and the API's views, with their buckets.
    for view, method in (
        ("console:work_queue", "GET"),
        ("console:review", "POST"),
        ("console:retry", "POST"),
        ("console:submission", "GET"),
        ("api:task", "POST"),
        ("api:task", "GET"),
    ):
        buckets = [
            sample
            for sample in samples
            if sample.name == LATENCY
            and sample.labels["view"] == view
            and sample.labels["method"] == method
        ]
        assert buckets, f"no latency buckets for {method} {view}"
        assert {"0.005", "1.0", "+Inf"} <= {sample.labels["le"] for sample in buckets}
        assert max(sample.value for sample in buckets if sample.labels["le"] == "+Inf") >= 1
    paths = {sample.labels["view"] for sample in samples if sample.name == LATENCY}
    assert not any(re.search(r"[0-9a-f]{32}", view) for view in paths)  # views, not URLs

    # Calls from the console to the API, by operation and outcome (an unknown one included).
    assert value(samples, CALLS, operation="ReviewTask", outcome="200") >= 1
    assert value(samples, CALLS, operation="RetryTask", outcome="201") >= 1
    assert value(samples, CALLS, operation="ReviewTask", outcome="unknown") >= 1
    assert value(samples, CALLS, operation="GetTask", outcome="200") >= 1
    # Answers of the embedded API: the lost one was answered (and committed) all the same.
    answered = {
        (sample.labels["endpoint"], sample.labels["status"]): sample.value
        for sample in samples
        if sample.name == ANSWERS
    }
    assert sum(n for (_, status), n in answered.items() if status == "200") >= 3
    assert sum(n for (_, status), n in answered.items() if status == "201") >= 1

    # Submissions by state, read from the database at scrape time; the reconciler's view.
    assert value(samples, "orbit_submissions", state="unknown") >= 1
    assert value(samples, "orbit_submissions", state="succeeded") >= 2
    assert {s.labels["state"] for s in samples if s.name == "orbit_submissions"} == {
        "pending",
        "unknown",
        "retry_later",
        "succeeded",
        "rejected",
        "cancelled",  # a batch's submission not sent before the batch was cancelled
    }
    # Exported (``value`` asserts the series is there); their values are tested below.
    assert value(samples, "orbit_reconciler_backlog") >= 0
    assert value(samples, "orbit_reconciler_lag_seconds") >= 0
    assert value(samples, "orbit_channel_layer_publish_failures_total") >= 0
    assert values(samples, SOCKETS, consumer="approvals") == [0]


def test_the_wizard_reads_the_attempts_for_the_evidence_step_only(
    metered: tuple[DaphneServer, FaultyProxy],
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Issue 12: every step re-reads the task (its present state and revision), but only the
    verify step shows the attempts, so only it asks for them."""
    server, _ = metered

    def calls(operation: str) -> float:
        found = values(scrape(server, METRICS_TOKEN), CALLS, operation=operation, outcome="200")
        return sum(found)

    with signed_in(server.url, people["operator"]) as console:
        before = calls("GetTask"), calls("ListAttempts")
        wizard_to_confirm(console, world["tasks"]["needs_review"], "review", review_values())
        after = calls("GetTask"), calls("ListAttempts")
    assert (after[0] - before[0], after[1] - before[1]) == (3, 1)  # verify, decide, confirm


def test_a_receipt_reads_the_task_once(
    metered: tuple[DaphneServer, FaultyProxy],
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    """Issue 12: the submission's page checks that the person may read the task (GetTask) and
    shows the task as it is now; the check's own read is the one shown (it read two times)."""
    server, _ = metered
    task_id = world["tasks"]["needs_review"]

    def reads() -> float:
        found = values(scrape(server, METRICS_TOKEN), CALLS, operation="GetTask", outcome="200")
        return sum(found)

    with signed_in(server.url, people["operator"]) as console:
        confirm = wizard_to_confirm(console, task_id, "review", review_values())
        submission_id = submission_id_of(wizard_submit(console, task_id, "review", confirm.text))
        before = reads()
        receipt = console.get(f"/submissions/{submission_id}")
        assert receipt.status_code == 200, receipt.text
        assert reads() - before == 1


def test_open_websockets_gauge_follows_a_timeline_socket(
    metered: tuple[DaphneServer, FaultyProxy],
    world: dict[str, Any],
    people: dict[str, TestPerson],
) -> None:
    server, _proxy = metered
    assert gauge_eventually(server, 0) == 0
    with signed_in(server.url, people["auditor"]) as auditor:
        session = auditor.http.cookies["sessionid"]
    url = f"{server.url.replace('http://', 'ws://', 1)}/ws/tasks/{world['tasks']['succeeded']}"
    with connect(
        f"{url}/timeline",
        origin=Origin(server.url),
        additional_headers={"Cookie": f"sessionid={session}"},
        proxy=None,
        open_timeout=EVENTUALLY_SECONDS,
    ):
        assert gauge_eventually(server, 1) == 1
    assert gauge_eventually(server, 0) == 0


def test_a_refused_socket_is_not_counted(
    metered: tuple[DaphneServer, FaultyProxy], world: dict[str, Any]
) -> None:
    """A socket without a session is closed before its consumer runs (with 4401, so that the
    page says "signed out": ops/sockets.SessionWatch) and leaves no count behind."""
    server, _proxy = metered
    url = f"{server.url.replace('http://', 'ws://', 1)}/ws/tasks/{world['tasks']['succeeded']}"
    with (
        connect(
            f"{url}/timeline",
            origin=Origin(server.url),
            proxy=None,
            open_timeout=EVENTUALLY_SECONDS,
        ) as socket,
        pytest.raises(ConnectionClosed) as closed,
    ):
        socket.recv(timeout=EVENTUALLY_SECONDS)
    assert closed.value.rcvd is not None and closed.value.rcvd.code == CLOSE_UNAUTHENTICATED
    assert value(scrape(server, METRICS_TOKEN), SOCKETS, consumer="timeline") == 0


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "Bearer",
        f"Bearer {METRICS_TOKEN}x",
        f"Bearer {METRICS_TOKEN[:-1]}",
        f"Basic {METRICS_TOKEN}",
        METRICS_TOKEN,  # the token without its scheme
    ],
    ids=["none", "empty", "longer", "shorter", "basic", "raw"],
)
def test_metrics_without_the_right_token_do_not_exist(
    metered: tuple[DaphneServer, FaultyProxy], authorization: str | None
) -> None:
    server, _proxy = metered
    headers = {"Authorization": authorization} if authorization is not None else {}
    answer = httpx.get(f"{server.url}/metrics", headers=headers, timeout=30)
    assert answer.status_code == 404
    assert "orbit_" not in answer.text


def test_metrics_do_not_exist_where_no_token_is_configured(orbit_server: DaphneServer) -> None:
    for headers in ({}, {"Authorization": "Bearer"}, {"Authorization": "Bearer anything"}):
        answer = httpx.get(f"{orbit_server.url}/metrics", headers=headers, timeout=30)
        assert answer.status_code == 404
        assert "orbit_" not in answer.text


def test_the_reverse_proxy_never_routes_metrics() -> None:
    conf = (Path(settings.BASE_DIR) / "deploy" / "nginx.conf").read_text()
    assert re.search(r"location\s*=\s*/metrics\s*\{\s*return\s+404;\s*\}", conf)


# --- Series computed without a server -------------------------------------------------------------


@pytest.mark.django_db
def test_reconciler_backlog_and_lag_count_open_submissions_whose_resend_is_due() -> None:
    """Read from the database at scrape time: an unknown outcome due 30 s ago is the backlog
    and sets the lag; one due in an hour and a settled one do not count. The series count every
    submission there is, and other modules' live servers leave theirs on this worker's database:
    what this test adds is counted against what was there before it."""

    def scraped() -> dict[str, list[Any]]:
        return {family.name: family.samples for family in SubmissionCollector().collect()}

    def by_state(gauges: dict[str, list[Any]]) -> dict[str, float]:
        return {s.labels["state"]: s.value for s in gauges["orbit_submissions"]}

    before = scraped()
    person = User.objects.create(username="metrics-operator")
    now = timezone.now()
    created = {
        name: submission_create(
            action="review",
            task_id=new_id(),
            expected_revision="3",
            body='{"stored": true}',
            created_by=person,
        ).submission
        for name in ("due", "later", "settled")
    }
    for name, state, next_attempt_at in (
        ("due", SubmissionState.UNKNOWN, now - timedelta(seconds=30)),
        ("later", SubmissionState.UNKNOWN, now + timedelta(hours=1)),
        ("settled", SubmissionState.SUCCEEDED, now - timedelta(hours=1)),
    ):
        Submission.objects.filter(id=created[name].id).update(
            state=state, next_attempt_at=next_attempt_at
        )

    gauges = scraped()

    [backlog_before] = before["orbit_reconciler_backlog"]
    [backlog] = gauges["orbit_reconciler_backlog"]
    assert backlog.value - backlog_before.value == 1
    [lag] = gauges["orbit_reconciler_lag_seconds"]
    assert lag.value >= 30
    if backlog_before.value == 0:
        assert lag.value < 90
    added = {
        state: by_state(gauges)[state] - by_state(before)[state]
        for state in ("unknown", "succeeded", "pending")
    }
    assert added == {"unknown": 2, "succeeded": 1, "pending": 0}


def test_a_publish_the_channel_layer_refuses_is_counted_and_not_raised() -> None:
    """A real Redis client against a port nobody listens on: the write that publishes goes on,
    and the failure shows in ``orbit_channel_layer_publish_failures_total``."""
    unreachable = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{free_port()}/0"]},
        }
    }
    before = publish_failures()
    with override_settings(CHANNEL_LAYERS=unreachable):
        assert publish(task_group(new_id()), {"type": "console.event", "event": {}}) is False
    assert publish_failures() == before + 1


def test_a_publish_to_a_hung_channel_layer_gives_up_within_its_timeout() -> None:
    """Issue 14: a Redis that accepts connections and never answers (as when it is paused)
    held the request that published for as long as it hung. Now the publish gives up after
    ``ORBIT_PUBLISH_TIMEOUT`` and is counted; the write goes on."""
    before = publish_failures()
    with silent_server() as silent:
        hung = silent.as_channel_layer()
        with override_settings(CHANNEL_LAYERS=hung, ORBIT_PUBLISH_TIMEOUT=0.3):
            started = time.monotonic()
            assert publish(task_group(new_id()), {"type": "console.event", "event": {}}) is False
            waited = time.monotonic() - started
        assert silent.held, "the client never reached the silent server"
    assert waited < 2, f"the publish hung for {waited:.1f} s"  # without the timeout: forever
    assert publish_failures() == before + 1


def publish_failures() -> float:
    return sample_of(PUBLISH_FAILURES, "orbit_channel_layer_publish_failures_total")


def sample_of(metric: Any, name: str) -> float:
    """One sample of one metric, read from it alone: the default registry would also run the
    collectors that read the database, which a test without database access must not."""
    [found] = [s.value for family in metric.collect() for s in family.samples if s.name == name]
    return float(found)


# --- Gauges read at scrape time (issue 33: what the alert rules need) ----------------------------


def gauges(collector: ScrapeCollector) -> dict[str, list[Sample]]:
    return {family.name: family.samples for family in collector.collect()}


def one(found: dict[str, list[Sample]], name: str, **labels: str) -> float:
    [sample] = [s for s in found[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    return sample.value


def stored_submission(person: User, state: str, *, age: timedelta, **fields: Any) -> Submission:
    submission = submission_create(
        action="review",
        task_id=new_id(),
        expected_revision="3",
        body='{"stored": true}',
        created_by=person,
    ).submission
    Submission.objects.filter(id=submission.id).update(
        state=state, created_at=timezone.now() - age, **fields
    )
    return Submission.objects.get(id=submission.id)


@pytest.mark.django_db
def test_the_oldest_open_submission_of_each_state_is_its_age() -> None:
    """``orbit_submissions_oldest_open_seconds{state="unknown"}``: an outcome unknown for a
    long time is what the UnknownOutcomeTooOld alert watches; settled ones never count."""
    person = User.objects.create(username="metrics-oldest")
    stored_submission(person, SubmissionState.UNKNOWN, age=timedelta(days=30))
    stored_submission(person, SubmissionState.SUCCEEDED, age=timedelta(days=60))
    found = gauges(SubmissionCollector())
    unknown = one(found, "orbit_submissions_oldest_open_seconds", state="unknown")
    assert 30 * 86400 <= unknown < 30 * 86400 + 600
    assert {s.labels["state"] for s in found["orbit_submissions_oldest_open_seconds"]} == {
        "pending",
        "unknown",
        "retry_later",
    }
    Submission.objects.filter(state=SubmissionState.UNKNOWN).update(state=SubmissionState.SUCCEEDED)
    found = gauges(SubmissionCollector())
    assert one(found, "orbit_submissions_oldest_open_seconds", state="unknown") == 0


@pytest.mark.django_db
def test_approvals_waiting_count_pending_decisions_and_proposed_batches_with_their_age() -> None:
    """An expired proposal no longer waits (its supervisor can no longer approve it)."""
    person = User.objects.create(username="metrics-proposer")
    before = gauges(SubmissionCollector())
    now = timezone.now()
    for expires_in in (timedelta(hours=1), -timedelta(minutes=1)):
        Proposal.objects.create(
            action="review",
            task_id=new_id(),
            expected_revision="1",
            idempotency_key=new_id(),
            body="{}",
            proposed_by=person,
            required_approvals=1,
            created_at=now - timedelta(days=20),
            expires_at=now + expires_in,
        )
    Batch.objects.create(
        action="review",
        created_by=person,
        created_at=now - timedelta(days=21),
        state=BatchState.PROPOSED,
    )
    after = gauges(SubmissionCollector())
    for kind in ("decision", "batch"):
        waiting = one(after, "orbit_approvals_waiting", kind=kind)
        assert waiting == one(before, "orbit_approvals_waiting", kind=kind) + 1
    assert one(after, "orbit_approvals_oldest_waiting_seconds", kind="decision") >= 20 * 86400
    assert one(after, "orbit_approvals_oldest_waiting_seconds", kind="batch") >= 21 * 86400
    assert (
        one(after, "orbit_batches", state="proposed")
        == one(before, "orbit_batches", state="proposed") + 1
    )


def running_batch(person: User, *, started: timedelta, **fields: Any) -> Batch:
    return Batch.objects.create(
        action="review",
        created_by=person,
        created_at=timezone.now() - started,
        started_at=timezone.now() - started,
        state=BatchState.RUNNING,
        **fields,
    )


def item(batch: Batch, submission: Submission | None, **fields: Any) -> BatchItem:
    return BatchItem.objects.create(
        batch=batch,
        task_id=submission.task_id if submission else new_id(),
        seen_state="NEEDS_REVIEW",
        submission=submission,
        **fields,
    )


@pytest.mark.django_db
def test_a_batch_item_due_and_unsent_is_the_batch_workers_lag_unless_the_api_holds_it() -> None:
    """``orbit_batches_oldest_due_seconds``: a due item of a running batch that nobody sends
    (the BatchWorkerNotSending alert); a batch held after a 429 (RT7) is not late."""
    person = User.objects.create(username="metrics-batches")
    now = timezone.now()
    due = stored_submission(
        person,
        SubmissionState.PENDING,
        age=timedelta(days=40),
        next_attempt_at=now - timedelta(days=40),
        reconcile_deadline=now + timedelta(hours=1),
    )
    held = stored_submission(
        person,
        SubmissionState.RETRY_LATER,
        age=timedelta(days=50),
        next_attempt_at=now - timedelta(days=50),
        reconcile_deadline=now + timedelta(hours=1),
    )
    before = gauges(SubmissionCollector())
    item(running_batch(person, started=timedelta(days=40)), due)
    item(
        running_batch(person, started=timedelta(days=50), hold_until=now + timedelta(hours=1)), held
    )
    after = gauges(SubmissionCollector())
    late = one(after, "orbit_batches_oldest_due_seconds")
    assert 40 * 86400 <= late < 41 * 86400  # the held one, older still, does not count
    assert (
        one(after, "orbit_batch_items_unsettled") == one(before, "orbit_batch_items_unsettled") + 2
    )
    assert (
        one(after, "orbit_batches", state="running")
        == one(before, "orbit_batches", state="running") + 2
    )


@pytest.mark.django_db
def test_a_running_batch_that_settles_nothing_is_stalled_since_its_last_settled_item() -> None:
    """``orbit_batches_since_progress_seconds``: from the last settled item, or the start;
    a batch with nothing left is not stalled however old."""
    person = User.objects.create(username="metrics-stalled")
    now = timezone.now()
    stalled = running_batch(person, started=timedelta(days=70))
    item(stalled, None, outcome="applied", settled_at=now - timedelta(days=60))
    item(stalled, None)  # left
    done = running_batch(person, started=timedelta(days=90))
    item(done, None, outcome="applied", settled_at=now - timedelta(days=80))
    since = one(gauges(SubmissionCollector()), "orbit_batches_since_progress_seconds")
    assert 60 * 86400 <= since < 61 * 86400
    BatchItem.objects.filter(batch=stalled, outcome="").update(outcome="applied", settled_at=now)
    assert one(gauges(SubmissionCollector()), "orbit_batches_since_progress_seconds") < 60 * 86400


def signed_verification(ran_at: datetime, *, ok: bool) -> ChainVerification:
    """A verification row as ``audit verify`` records it: its statement signed with the
    checkpoint key (``audit/status.py``)."""
    statement = json.dumps(
        {
            "format": audit_status.VERIFICATION_FORMAT,
            "ran_at": format_utc(ran_at),
            "ok": ok,
            "checked": 3,
            "problems": 0 if ok else 1,
            "first_break": "" if ok else "x",
            "database": "test",
            "checkpoint": None,
        }
    )
    key_id, signature = signing.sign(statement.encode())
    return ChainVerification.objects.create(
        ran_at=ran_at,
        ok=ok,
        checked=3,
        first_break="" if ok else "x",
        statement=statement,
        key_id=key_id,
        signature=signature,
    )


@pytest.mark.django_db
def test_the_audit_gauges_read_the_newest_signed_checkpoint_and_verification() -> None:
    """Only rows whose signature holds count (issue 29): a result written by hand, newer
    than the signed ones, makes the gauge say failing rather than keep the alert quiet."""
    taken = timezone.now() + timedelta(days=1)  # newer than any a test wrote for real
    series = new_id()
    key_id, signature = signing.sign(listed_message(series, 1, "0" * 64, taken))
    WrittenCheckpoint.objects.create(
        series=series,
        number=1,
        digest="0" * 64,
        taken_at=taken,
        key_id=key_id,
        signature=signature,
    )
    WrittenCheckpoint.objects.create(  # by hand: no signature
        series=series, number=2, digest="1" * 64, taken_at=taken + timedelta(hours=1)
    )
    ran = timezone.now() + timedelta(days=2)
    signed_verification(ran, ok=False)
    found = gauges(AuditCollector())
    assert one(found, "orbit_audit_checkpoint_last_timestamp_seconds") == taken.timestamp()
    assert one(found, "orbit_audit_verify_last_timestamp_seconds") == ran.timestamp()
    assert one(found, "orbit_audit_verify_failing") == 1
    signed_verification(ran + timedelta(seconds=1), ok=True)
    assert one(gauges(AuditCollector()), "orbit_audit_verify_failing") == 0
    ChainVerification.objects.create(  # "ok", by hand: it cannot silence the alert
        ran_at=ran + timedelta(seconds=2), ok=True, checked=3, first_break=""
    )
    found = gauges(AuditCollector())
    assert one(found, "orbit_audit_verify_failing") == 1
    assert (
        one(found, "orbit_audit_verify_last_timestamp_seconds")
        == (ran + timedelta(seconds=1)).timestamp()
    )


@pytest.mark.django_db
def test_a_process_that_cannot_check_signatures_reports_the_audit_as_failing(
    settings: Any,
) -> None:
    """A console without ``ORBIT_AUDIT_VERIFY_KEYS`` cannot tell a signed result from one
    written by hand: it does not report the audit as passing."""
    signed_verification(timezone.now() + timedelta(days=3), ok=True)
    settings.ORBIT_AUDIT_SIGNING_KEYS = []
    settings.ORBIT_AUDIT_VERIFY_KEYS = []
    keys = (signing._signing_keys, signing._verify_keys)  # read once per process
    try:
        for cached in keys:
            cached.cache_clear()
        found = gauges(AuditCollector())
    finally:
        for cached in keys:
            cached.cache_clear()
    assert one(found, "orbit_audit_verify_failing") == 1
    assert one(found, "orbit_audit_verify_last_timestamp_seconds") == 0


@pytest.mark.django_db
def test_the_event_stream_backlog_is_what_subscribers_owe_and_its_lag_the_oldest() -> None:
    before = one(gauges(DeliveryCollector()), "orbit_events_owed")
    subscription = new_id()
    for sequence, age in ((1, timedelta(days=100)), (2, timedelta(seconds=1))):
        Delivery.objects.create(
            subscription_id=subscription, sequence=sequence, created_at=timezone.now() - age
        )
    found = gauges(DeliveryCollector())
    assert one(found, "orbit_events_owed") == before + 2
    assert 100 * 86400 <= one(found, "orbit_events_oldest_owed_seconds") < 101 * 86400


@pytest.mark.django_db
def test_the_feed_gauges_read_its_sources_and_the_consumers_lease() -> None:
    before = gauges(FeedCollector())
    Source.objects.create(
        namespace_id=new_id(),
        subscription_id=new_id(),
        token_ciphertext="-",
        label="metrics",
        created_at=timezone.now(),
        status=SourceStatus.DOWN,
    )
    expires = timezone.now() + timedelta(seconds=7)
    Leadership.objects.update_or_create(
        name=LEADERSHIP, defaults={"holder": "metrics-test", "expires_at": expires}
    )
    found = gauges(FeedCollector())
    assert one(found, "orbit_feed_sources", status="down") == (
        one(before, "orbit_feed_sources", status="down") + 1
    )
    assert one(found, "orbit_feed_lease_expires_timestamp_seconds") == expires.timestamp()


@pytest.mark.parametrize(
    "database",
    ["sqlite-missing-directory", "mysql-silent"],
)
def test_a_scrape_answers_without_the_database_and_says_it_is_unreachable(
    database: str, django_db_setup: None, django_db_blocker: Any
) -> None:
    """A scrape read the database's gauges first: with the database away it failed whole
    (500), or hung for the driver's timeouts, and Prometheus saw a process down, not a
    database. Now it probes first (as ``/health/ready`` does), says
    ``orbit_dependency_up{dependency="database"} 0``, and serves everything else."""
    with ExitStack() as stack:
        if database == "mysql-silent":
            pytest.importorskip("MySQLdb", reason="the MySQL driver is the opt-in extra 'mysql'")
            silent = stack.enter_context(silent_server())
            env = {
                "DATABASE_URL": f"mysql://orbit@127.0.0.1:{silent.port}/orbit",
                "DATABASE_CONNECT_TIMEOUT_SECONDS": "20",
            }
        else:
            env = {"DATABASE_URL": "sqlite:////nonexistent-dir/orbit.sqlite3"}
        with django_db_blocker.unblock():
            server = DaphneServer(
                f"ops-metrics-{database}", env={**env, "METRICS_TOKEN": METRICS_TOKEN}
            )
        stack.callback(server.stop)
        server.start()
        started = time.monotonic()
        samples = scrape(server, METRICS_TOKEN)
        took = time.monotonic() - started
    assert value(samples, "orbit_dependency_up", dependency="database") == 0
    assert value(samples, "orbit_dependency_up", dependency="channel_layer") == 1
    assert not values(samples, "orbit_submissions", state="pending")  # left out, not failed
    assert values(samples, "orbit_websockets_open", consumer="approvals") == [0]
    assert took < 15, f"the scrape took {took:.1f} s"  # a silent database held it for 20 s


def test_a_scrape_says_the_database_and_the_channel_layer_answer(
    metered: tuple[DaphneServer, FaultyProxy],
) -> None:
    samples = scrape(metered[0], METRICS_TOKEN)
    assert value(samples, "orbit_dependency_up", dependency="database") == 1
    assert value(samples, "orbit_dependency_up", dependency="channel_layer") == 1


def test_a_publish_the_channel_layer_takes_is_timed_and_a_refused_one_is_not() -> None:
    """``orbit_live_publish_duration_seconds``: the dashboard's push latency."""
    before = publish_timings()
    assert publish(task_group(new_id()), {"type": "console.event", "event": {}}) is True
    assert publish_timings() == before + 1
    unreachable = {
        "default": {
            "BACKEND": "channels_redis.core.RedisChannelLayer",
            "CONFIG": {"hosts": [f"redis://127.0.0.1:{free_port()}/0"]},
        }
    }
    with override_settings(CHANNEL_LAYERS=unreachable):
        assert publish(task_group(new_id()), {"type": "console.event", "event": {}}) is False
    assert publish_timings() == before + 1


def publish_timings() -> float:
    return sample_of(PUBLISH_LATENCY, "orbit_live_publish_duration_seconds_count")
