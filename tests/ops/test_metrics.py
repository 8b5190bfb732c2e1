"""``/metrics`` (issue 7): Prometheus series of one console process after a review, a retry
and an outcome-unknown submission made through the console (C9), and a live timeline socket.
The endpoint exists only for a request bearing ``METRICS_TOKEN``; the reverse proxy never
routes it."""

import re
import secrets
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import override_settings
from django.utils import timezone
from prometheus_client import REGISTRY
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect
from websockets.typing import Origin

from orbit_console.decisions.metrics import SubmissionCollector
from orbit_console.decisions.models import Submission, SubmissionState
from orbit_console.decisions.submissions import submission_create
from orbit_console.lib.ids import new_id
from orbit_console.lib.live import CLOSE_UNAUTHENTICATED, publish, task_group
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
    and sets the lag; one due in an hour and a settled one do not count."""
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

    gauges = {family.name: family.samples for family in SubmissionCollector().collect()}

    assert [sample.value for sample in gauges["orbit_reconciler_backlog"]] == [1]
    [lag] = gauges["orbit_reconciler_lag_seconds"]
    assert 30 <= lag.value < 90
    by_state = {s.labels["state"]: s.value for s in gauges["orbit_submissions"]}
    assert (by_state["unknown"], by_state["succeeded"], by_state["pending"]) == (2, 1, 0)


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
    counted = REGISTRY.get_sample_value("orbit_channel_layer_publish_failures_total")
    assert counted is not None
    return counted
