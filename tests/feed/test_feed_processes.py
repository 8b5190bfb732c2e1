"""The console's feed of Orbit's event stream between real processes (docs/events.md): the
recovery API (``orbit_server``) as an external Orbit, console processes that reach it only
over HTTP and its event stream (``ORBIT_API_URL``), and ``manage.py feed run``.

- a retry decided through the console is followed to its end through the stream (I2, I3), and
  the live timeline of an external Orbit's task is fed by the stream, not by polling;
- a consumer killed after its commit and before its ACK: the delivery comes back after the
  lease and the inbox applies it once (I3);
- two console processes elect one consumer, and the other takes over when it dies;
- a stream that disappears: the follow-ups are looked after by bounded looks (I4), which stop
  at their deadline.
"""

import asyncio
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.conf import settings
from django.utils import timezone
from websockets.asyncio.client import connect
from websockets.typing import Origin

from orbit_console.decisions.followups import FIRST_LOOK
from orbit_console.decisions.models import ConsoleEvent, FollowUp, Submission
from orbit_console.feed.models import InboxEvent, Leadership, Source
from orbit_console.feed.sources import source_add
from orbit_console.ledger import lifecycle
from orbit_console.ledger.models import AttemptOutcome, Namespace, Task
from tests.console.web import (
    retry_values,
    signed_in,
    submission_id_of,
    wizard_submit,
    wizard_to_confirm,
)
from tests.support.orbit import bearer, post, retry_body
from tests.support.people import make_person
from tests.support.servers import LOG_DIR, DaphneServer, child_env, free_port
from tests.timeline.helpers import session_cookie, timeline_path
from tests.timeline.test_live_processes import entry_arrives, review_over_http

WAIT = 40.0  # generous: two cores and other suites at once; never a timing assertion
LEASE = "2"  # seconds of the consumer's lease: a takeover within a few seconds
FEED_ENV = {"CONSOLE_FEED": "server", "CONSOLE_FEED_LEASE_SECONDS": LEASE, "REDIS_URL": ""}
CRASH_BEFORE_ACK = Path(__file__).with_name("crash_before_ack.py")


def eventually[T](read: Callable[[], T], *, until: Callable[[T], bool], what: str) -> T:
    deadline = time.monotonic() + WAIT
    while True:
        value = read()
        if until(value):
            return value
        assert time.monotonic() < deadline, f"{what}: still {value!r}"
        time.sleep(0.2)


@pytest.fixture
def remote_settings(settings: Any, orbit_server: DaphneServer) -> Any:
    """This process reaches the API as the console processes do: over HTTP."""
    settings.ORBIT_API_URL = orbit_server.url
    settings.ORBIT_API_EMBEDDED = False
    return settings


@pytest.fixture
def feed_source(
    world: dict[str, Any], remote_settings: Any, request: pytest.FixtureRequest
) -> Iterator[Source]:
    """The world's namespace is consumed, with a subscription of short leases; no other
    namespace is (the sources of earlier tests are set aside)."""
    Source.objects.all().delete()
    Leadership.objects.all().delete()
    token = world["tokens"]["subscriber"]
    lease_ms = getattr(request, "param", 2000)
    subscription = remote_subscription(token, lease_ms)
    source = async_to_sync(source_add)(token=token, label="test feed", subscription_id=subscription)
    yield source
    Source.objects.filter(id=source.id).delete()


def remote_subscription(token: str, lease_ms: int) -> str:
    response = httpx.post(
        f"{settings.ORBIT_API_URL}/v1/subscriptions",
        json={"name": "console feed", "lease_ms": lease_ms},
        headers={**bearer(token), "Idempotency-Key": f"feed-test-{time.monotonic_ns()}"},
    )
    assert response.status_code == 201, response.text
    return str(response.json()["data"]["id"])


def console_process(name: str, orbit_server: DaphneServer, **extra: str) -> DaphneServer:
    return DaphneServer(name, env={"ORBIT_API_URL": orbit_server.url, **FEED_ENV, **extra})


def retry_through_console(console_url: str, world: dict[str, Any]) -> Submission:
    """A supervisor retries the world's FAILED task through the wizard (no approval needed)."""
    supervisor = make_person(world, "supervisor")
    task_id = world["tasks"]["failed"]
    with signed_in(console_url, supervisor) as console:
        confirm = wizard_to_confirm(console, task_id, "retry", retry_values())
        submission_id = submission_id_of(wizard_submit(console, task_id, "retry", confirm.text))
    submission = Submission.objects.get(id=submission_id)
    assert submission.state == "succeeded" and submission.result_task_id
    return submission


def finish(task_id: str, outcome: str = AttemptOutcome.SUCCEEDED) -> None:
    """A worker runs the task once (in this process: the console learns it from the stream)."""
    task = Task.objects.get(id=task_id)
    worker = lifecycle.actor_id_for(task.namespace_id, "worker-1")
    lifecycle.attempt_start(task=task, worker_id="worker-1")
    lifecycle.attempt_finish(task=task, worker_actor_id=worker, outcome=outcome, result="{}")


def ended(submission: Submission) -> FollowUp:
    return eventually(
        lambda: FollowUp.objects.get(submission=submission),
        until=lambda followup: followup.ended,
        what="the follow-up",
    )


def test_a_retry_is_followed_to_its_end_through_the_stream_I2_I3(
    world: dict[str, Any], orbit_server: DaphneServer, feed_source: Source
) -> None:
    console = console_process("feed-follow", orbit_server).start()
    try:
        submission = retry_through_console(console.url, world)
        followup = FollowUp.objects.get(submission=submission)
        assert (followup.task_id, followup.state) == (submission.result_task_id, "WAITING")
        assert not followup.ended
        eventually(
            lambda: Source.objects.get(id=feed_source.id).status,
            until=lambda status: status == "live",
            what="the stream",
        )
        finish(submission.result_task_id)
        followup = ended(submission)
        assert (followup.state, followup.revision) == ("SUCCEEDED", 3)
        recorded = ConsoleEvent.objects.filter(submission=submission, kind="submission.followed")
        assert [event.note for event in recorded] == [
            f"task {submission.result_task_id} is SUCCEEDED at revision 3"
        ]
        applied = InboxEvent.objects.filter(task_id=submission.result_task_id)
        assert {event.event_type for event in applied} >= {"task.completed"}
    finally:
        console.stop()


def test_an_external_orbits_timeline_is_fed_by_its_stream_I3(
    world: dict[str, Any], orbit_server: DaphneServer, feed_source: Source
) -> None:
    """A review and a retry made on the Orbit reach the viewers of the console's live timelines
    while the stream is live, and the feed applied their events (the inbox has them): the
    watcher publishes only while no stream is live. A retry is one event, the successor's
    acceptance (RT9): the feed publishes the retry's own record to the source's timeline."""
    auditor = make_person(world, "auditor")
    console = console_process("feed-timeline", orbit_server).start()
    reviewed, retried = world["tasks"]["needs_review"], world["tasks"]["failed"]
    try:
        eventually(
            lambda: Source.objects.get(id=feed_source.id).status,
            until=lambda status: status == "live",
            what="the stream",
        )

        async def watch(task_id: str, decide: Callable[[], Any]) -> tuple[str, str]:
            cookie = f"sessionid={await asyncio.to_thread(session_cookie, auditor.user)}"
            async with connect(
                console.url.replace("http://", "ws://", 1) + timeline_path(task_id),
                origin=Origin(console.url),
                additional_headers={"Cookie": cookie},
            ) as socket:
                audit_id = await decide()
                return audit_id, await entry_arrives(socket, f"entry-op-{audit_id}")

        def retry_over_http() -> str:
            with httpx.Client(base_url=orbit_server.url) as api:
                response = post(api, retried, "retry", world["tokens"]["admin"], retry_body())
            assert response.status_code == 201, response.text
            return str(response.json()["data"]["audit_id"])

        async def retry() -> str:
            return await asyncio.to_thread(retry_over_http)

        for task_id, decide in (
            (reviewed, lambda: review_over_http(orbit_server, world, "needs_review")),
            (retried, retry),
        ):
            audit_id, fragment = asyncio.run(watch(task_id, decide))
            assert f'id="entry-op-{audit_id}"' in fragment
            assert 'hx-swap-oob="afterbegin:#timeline-entries"' in fragment
        assert InboxEvent.objects.filter(task_id=reviewed, event_type="task.completed").exists()
        successor = Task.objects.get(retry_of=retried)
        assert InboxEvent.objects.filter(task_id=successor.id, event_type="task.accepted").exists()
    finally:
        console.stop()


@pytest.mark.parametrize("feed_source", [1500], indirect=True)
def test_a_consumer_killed_before_its_ack_is_applied_once_I3(
    world: dict[str, Any], orbit_server: DaphneServer, feed_source: Source
) -> None:
    """The first consumer commits the event's effect and dies before acknowledging it; the
    next one is handed the same delivery after its lease, and its inbox applies nothing again."""
    console = console_process("feed-crash", orbit_server, CONSOLE_FEED="off").start()
    try:
        submission = retry_through_console(console.url, world)
    finally:
        console.stop()
    env = child_env(ORBIT_API_URL=orbit_server.url, **FEED_ENV)
    log = (LOG_DIR / f"feed-crash-{free_port()}.log").open("ab")
    crashing = subprocess.Popen(
        [sys.executable, str(CRASH_BEFORE_ACK)],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        finish(submission.result_task_id)
        assert crashing.wait(timeout=WAIT) == 17  # died at its first ACK, after the commit
    finally:
        if crashing.poll() is None:
            crashing.kill()
    applied = InboxEvent.objects.filter(
        task_id=submission.result_task_id, event_type="task.completed"
    )
    assert applied.count() == 1
    first = applied.get()
    assert FollowUp.objects.get(submission=submission).ended
    backlog = subscription_backlog(world, feed_source)
    assert backlog >= 1  # owed still: the ACK never went out

    Leadership.objects.all().delete()  # the dead process's lease: as if it had run out
    health = free_port()  # as orbit-feed runs it (deploy/kubernetes/base/feed.yaml)
    again = subprocess.Popen(
        [sys.executable, "manage.py", "feed", "run", "--health-port", str(health)],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=log,
        stderr=log,
    )
    try:
        eventually(
            lambda: subscription_backlog(world, feed_source), until=lambda n: n == 0, what="backlog"
        )
        # Its health port answers the kubelet's probes: ready once a round read the lease.
        live = httpx.get(f"http://127.0.0.1:{health}/health/live", timeout=10)
        assert live.json() == {"status": "live", "loop": "feed"}
        ready = httpx.get(f"http://127.0.0.1:{health}/health/ready", timeout=10)
        assert ready.status_code == 200
        assert ready.json()["status"] == "ready" and ready.json()["last_success"]
    finally:
        again.send_signal(signal.SIGTERM)
        again.wait(timeout=WAIT)
        log.close()
    assert list(applied) == [first]  # applied once: the redelivery found it in the inbox
    assert (
        ConsoleEvent.objects.filter(submission=submission, kind="submission.followed").count() == 1
    )


def subscription_backlog(world: dict[str, Any], source: Source) -> int:
    response = httpx.get(
        f"{settings.ORBIT_API_URL}/v1/subscriptions/{source.subscription_id}",
        headers=bearer(world["tokens"]["subscriber"]),
    )
    return int(response.json()["data"]["backlog"])


def test_two_console_processes_elect_one_consumer_and_the_other_takes_over(
    world: dict[str, Any], orbit_server: DaphneServer, feed_source: Source
) -> None:
    first = console_process("feed-a", orbit_server).start()
    second = console_process("feed-b", orbit_server).start()
    try:
        # Each is a candidate from the first connection it served (its liveness probe).
        pids = {first.process.pid: first, second.process.pid: second}  # type: ignore[union-attr]
        holder = eventually(
            lambda: Leadership.objects.filter(name="feed").first(),
            until=lambda row: row is not None and row.expires_at > timezone.now(),
            what="a consumer",
        )
        leader_pid = int(holder.holder.split(":")[1])
        assert leader_pid in pids
        leader, other = pids[leader_pid], next(s for p, s in pids.items() if p != leader_pid)
        for _ in range(3):  # the lease stays where it is while its holder lives
            time.sleep(float(LEASE) / 2)
            assert Leadership.objects.get(name="feed").holder == holder.holder

        leader.process.kill()  # type: ignore[union-attr]
        leader.process.wait()  # type: ignore[union-attr]
        took_over = eventually(
            lambda: Leadership.objects.get(name="feed").holder,
            until=lambda name: name != holder.holder,
            what="the lease",
        )
        assert int(took_over.split(":")[1]) == other.process.pid  # type: ignore[union-attr]
        task = lifecycle.task_accept(
            queue=Namespace.objects.get(id=world["namespace_id"]).queues.get(id=world["queue_id"]),
            actor_id=lifecycle.actor_id_for(world["namespace_id"], "submitter"),
            handler="object.prepare",
            payload="{}",
        )
        eventually(
            lambda: InboxEvent.objects.filter(task_id=task.id).count(),
            until=lambda n: n == 1,
            what="the event after the takeover",
        )
    finally:
        first.stop()
        second.stop()


def test_a_stream_that_disappears_leaves_the_follow_ups_to_bounded_looks_I4(
    world: dict[str, Any], orbit_server: DaphneServer, feed_source: Source
) -> None:
    console = console_process("feed-gone", orbit_server).start()
    try:
        submission = retry_through_console(console.url, world)
        eventually(
            lambda: Source.objects.get(id=feed_source.id).status,
            until=lambda status: status == "live",
            what="the stream",
        )
        gone = httpx.delete(
            f"{orbit_server.url}/v1/subscriptions/{feed_source.subscription_id}",
            headers=bearer(world["tokens"]["subscriber"]),
        )
        assert gone.status_code == 200
        eventually(
            lambda: Source.objects.get(id=feed_source.id).status,
            until=lambda status: status in ("missing", "refused", "down"),
            what="the stream's status",
        )
        # A follow-up past its deadline is no longer looked at.
        stale = retry_elsewhere(world, console.url)
        FollowUp.objects.filter(submission=stale).update(
            deadline=timezone.now() - timedelta(seconds=1)
        )
        finish(submission.result_task_id, AttemptOutcome.FAILED)
        finish(stale.result_task_id)
        followup = ended(submission)  # seen by a look, not by an event
        assert followup.state == "FAILED" and followup.looks >= 1
        completed = InboxEvent.objects.filter(
            task_id=submission.result_task_id, event_type="task.completed"
        )
        assert not completed.exists()
        # Past the moment its first look was due (and a round of the consumer after it):
        due = FollowUp.objects.get(submission=stale).seen_at + FIRST_LOOK
        time.sleep(max(0.0, (due - timezone.now()).total_seconds()) + 2 * float(LEASE))
        late = FollowUp.objects.get(submission=stale)
        assert not late.ended and late.looks == 0 and late.state == "WAITING"
    finally:
        console.stop()


def retry_elsewhere(world: dict[str, Any], console_url: str) -> Submission:
    """A second retry in the world: of its CANCELLED task."""
    supervisor = make_person(world, "supervisor")
    task_id = world["tasks"]["cancelled"]
    with signed_in(console_url, supervisor) as console:
        confirm = wizard_to_confirm(console, task_id, "retry", retry_values())
        submission_id = submission_id_of(wizard_submit(console, task_id, "retry", confirm.text))
    return Submission.objects.get(id=submission_id)
