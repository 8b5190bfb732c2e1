"""Tasks waiting for a person, from Orbit's event stream as the console's feed consumes it
(docs/insight.md, issue 43 item 3): the embedded recovery API's real stream (orbit.events.v1,
in process: the same handshake, frames, leases and redeliveries as over the network), each
delivery handled by the feed's own ``event_handle`` — read the task again with the feed's
credential, apply in the inbox's transaction — and acknowledged after the commit (I3).

- a task parked in NEEDS_REVIEW waits from the event's moment, with its handler, queue and
  last error code, until its review; a delivery that comes again after its lease is counted
  once;
- a task that ended FAILED by execution, a retry possible, waits until it is retried;
- before the first event, the backfill opens the tasks already in NEEDS_REVIEW and ends those
  no longer there, once per subscription, bounded.
"""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.routing import ProtocolTypeRouter, URLRouter
from django.urls import re_path
from django.utils import timezone

from orbit_console.client.events import Delivery, EventStreamConnection
from orbit_console.events.origins import EventOriginValidator
from orbit_console.events.routing import websocket_urlpatterns as api_websockets
from orbit_console.events.subscriptions import SubscriptionRequest, subscription_insert
from orbit_console.feed.consumer import APPLIED, KNOWN, Reader, event_handle
from orbit_console.feed.models import Source
from orbit_console.feed.sources import source_stream
from orbit_console.insight import waiting
from orbit_console.insight.models import Backfill, Wait, WaitingSample, WaitTally
from orbit_console.insight.waiting import (
    Waiting,
    backfill,
    wait_decision_started,
    wait_end,
    wait_open,
)
from orbit_console.ledger.lifecycle import (
    RetryPolicy,
    actor_id_for,
    attempt_finish,
    attempt_start,
    task_accept,
)
from orbit_console.ledger.models import AttemptOutcome, Credential, Queue
from orbit_console.ledger.models import Task as LedgerTask
from orbit_console.lib.ids import new_id
from orbit_console.lib.secretbox import seal
from orbit_console.people.person import token_client
from tests.insight.conftest import assert_rollups_match
from tests.support.orbit import retry_body, review_body

WAIT = 30.0  # generous: two cores and other suites at once; never a timing assertion

# The embedded API's event stream alone, as this process's ASGI application for the feed's
# in-process socket (client/inprocess.open_socket): the project's application would also start
# the server's background services (a batch worker, a feed) in the test process.
STREAM_ONLY = ProtocolTypeRouter(
    {"websocket": URLRouter([re_path(r"^v1/", EventOriginValidator(URLRouter(api_websockets)))])}
)


@pytest.fixture
def source(world: dict[str, Any], settings: Any) -> Iterator[Source]:
    """A subscription of the world's namespace with one-second leases, consumed with the
    world's subscriber token. Not stored as a feed source: no feed of another process of the
    test run consumes it, so every delivery comes to this test."""
    settings.ASGI_APPLICATION = "tests.insight.test_waiting.STREAM_ONLY"
    settings.ORBIT_EVENTS_POLL_MS = 100
    namespace = world["namespace_id"]
    subscriber = Credential.objects.get(namespace_id=namespace, actor_name="subscriber")
    subscription = subscription_insert(
        namespace_id=namespace,
        credential_id=subscriber.id,
        request=SubscriptionRequest(name="insight", queue_ids=(), lease_ms=1000, digest=new_id()),
        actor_id=subscriber.actor_id,
        key_digest=new_id(),
    )
    yield Source(
        id=new_id(),
        namespace_id=namespace,
        subscription_id=subscription.id,
        token_ciphertext=seal(world["tokens"]["subscriber"]),
        label="insight test",
        created_at=timezone.now(),
    )


def run_task(world: dict[str, Any], outcome: str, error: str) -> str:
    """A new task of the world's queue, run once by a worker to ``outcome``."""
    namespace = world["namespace_id"]
    task = task_accept(
        queue=Queue.objects.get(id=world["queue_id"]),
        actor_id=actor_id_for(namespace, "submitter"),
        handler="invoice.send",
        payload="{}",
        retry=RetryPolicy(max_attempts=1, attempt_timeout_ms=10_000),
    )
    attempt_start(task=task, worker_id="worker-1")
    attempt_finish(
        task=task,
        worker_actor_id=actor_id_for(namespace, "worker-1"),
        outcome=outcome,
        error=error,
    )
    return task.id


@contextlib.asynccontextmanager
async def reading(source: Source) -> AsyncIterator[Reader]:
    """What the feed reads again with the source's credential, for a test's scenario."""
    reader = Reader(source)
    try:
        yield reader
    finally:
        await reader.aclose()


async def take(
    stream: EventStreamConnection, reader: Reader, kind: str, task_id: str, *, ack: bool = True
) -> tuple[Delivery, str]:
    """Handle the stream's deliveries as the feed does (``event_handle``, then the ACK after
    its commit) until the one of ``kind`` for ``task_id``: it, and what became of it."""
    while True:
        delivery = await asyncio.wait_for(stream.receive(), WAIT)
        outcome = await event_handle(reader, delivery.event, attempt=delivery.attempt)
        wanted = delivery.event.type == kind and delivery.event.task_id == task_id
        if ack or not wanted:
            await stream.ack(delivery.proof)
        if wanted:
            return delivery, outcome


def entered(namespace_id: str) -> int:
    rows = WaitTally.objects.filter(namespace_id=namespace_id, grain="d", event="entered")
    return sum(rows.values_list("n", flat=True))


def test_a_parked_task_waits_from_its_event_until_its_review_and_a_redelivery_counts_once_I3(
    world: dict[str, Any], source: Source
) -> None:
    namespace = world["namespace_id"]
    admin = world["tokens"]["admin"]

    async def scenario() -> None:
        async with reading(source) as reader:
            async with await source_stream(source) as stream:
                task_id = await sync_to_async(run_task)(
                    world, AttemptOutcome.UNKNOWN, "disk full: /var/spool is full"
                )
                parked, outcome = await take(
                    stream, reader, "task.needs_review", task_id, ack=False
                )
                assert outcome == APPLIED
            # Handled and committed, but not acknowledged (a consumer that died before its ACK):
            # after its lease the same event comes again, and changes nothing.
            wait = await Wait.objects.aget(task_id=task_id)
            assert (wait.kind, wait.origin, wait.revision) == ("review", "stream", 3)
            assert (wait.handler, wait.queue_id) == ("invoice.send", world["queue_id"])
            assert wait.error_code == "disk full" and wait.entered_at == parked.event.occurred_at
            assert wait.is_open and wait.open_task == task_id
            async with await source_stream(source) as stream:
                again, outcome = await take(stream, reader, "task.needs_review", task_id)
                assert again.event.id == parked.event.id and again.attempt == 2
                assert outcome == KNOWN
                async with token_client(admin) as orbit:
                    await orbit.review_task(
                        task_id, idempotency_key=new_id(), body=json.dumps(review_body("3"))
                    )
                reviewed, _ = await take(stream, reader, "task.completed", task_id)
            wait = await Wait.objects.aget(task_id=task_id)
            assert (wait.end, wait.ended_at) == ("reviewed", reviewed.event.occurred_at)
            assert wait.open_task is None

    async_to_sync(scenario)()
    assert entered(namespace) == 1
    ended = WaitTally.objects.get(namespace_id=namespace, grain="d", event="ended_reviewed")
    assert ended.n == 1
    # The hour's first change kept what waited before it: nothing, in this fresh namespace.
    sample = WaitingSample.objects.get(namespace_id=namespace)
    assert (sample.count, sample.capped) == (0, False)
    assert_rollups_match(namespace)


def test_a_task_failed_by_execution_waits_for_a_retry_until_it_is_retried(
    world: dict[str, Any], source: Source
) -> None:
    """RT1: standalone, its effect certain, no successor: a retry is possible. A task whose
    effect is uncertain may not be retried and waits for nobody's retry."""
    namespace = world["namespace_id"]

    async def scenario() -> None:
        async with reading(source) as reader:
            async with await source_stream(source) as stream:
                task_id = await sync_to_async(run_task)(
                    world, AttemptOutcome.FAILED, "SMTP 451: try again later"
                )
                await take(stream, reader, "task.completed", task_id)
                wait = await Wait.objects.aget(task_id=task_id)
                assert (wait.kind, wait.error_code, wait.is_open) == ("retry", "SMTP 451", True)
                async with token_client(world["tokens"]["admin"]) as orbit:
                    receipt = await orbit.retry_task(
                        task_id, idempotency_key=new_id(), body=json.dumps(retry_body("3"))
                    )
                await take(stream, reader, "task.accepted", receipt.task.id)
            wait = await Wait.objects.aget(task_id=task_id)
            assert (wait.end, wait.open_task) == ("retried", None)

    async_to_sync(scenario)()
    assert entered(namespace) == 1
    assert_rollups_match(namespace)


def test_the_backfill_opens_what_already_waits_and_ends_what_no_longer_does_once(
    world: dict[str, Any], source: Source, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before the stream's first event: the tasks already in NEEDS_REVIEW, listed a page at a
    time (one task a page here, at most three: the rest is left to the stream), oldest first.
    A period still open for a task that left review while nobody listened (older than the
    last one listed) ends as gone; one younger than the cap's reach is not judged."""
    namespace = world["namespace_id"]
    monkeypatch.setattr(waiting, "PAGE", 1)
    settings.INSIGHT_BACKFILL_MAX = 3
    parked = list(
        LedgerTask.objects.filter(namespace_id=namespace, state="NEEDS_REVIEW")
        .order_by("updated_at", "id")
        .values_list("id", "updated_at")
    )
    assert len(parked) == 4  # the seed's: two, one leased, one a workflow's
    long_ago = timezone.now() - timedelta(days=3)
    gone = wait_open(
        Waiting(
            namespace_id=namespace,
            task_id=world["tasks"]["succeeded"],
            revision=2,
            kind="review",
            entered_at=long_ago,
            origin="stream",
        )
    )

    async def scenario() -> None:
        async with token_client(world["tokens"]["subscriber"]) as orbit:
            await backfill(source, orbit)
            await backfill(source, orbit)  # done once per subscription

    async_to_sync(scenario)()
    opened = dict(
        Wait.objects.filter(namespace_id=namespace, origin="backfill").values_list(
            "task_id", "entered_at"
        )
    )
    assert opened == dict(parked[:3])
    assert Wait.objects.get(id=gone.id).end == "gone"
    done = Backfill.objects.get(namespace_id=namespace, subscription_id=source.subscription_id)
    assert (done.listed, done.capped, done.opened, done.closed) == (3, True, 3, 1)
    assert_rollups_match(namespace)


def test_the_first_decision_started_while_the_task_waited_ends_its_waiting(live_db: None) -> None:
    """The waiting clock ends at the earliest decision started while the task waited; one
    started after another client's decision ended the waiting does not move it."""
    namespace, task_id = new_id(), new_id()
    parked = timezone.now() - timedelta(hours=3)
    seen = Waiting(
        namespace_id=namespace,
        task_id=task_id,
        revision=3,
        kind="review",
        entered_at=parked,
        origin="stream",
    )
    wait_open(seen)
    wait_decision_started(seen, started_at=parked + timedelta(hours=2))
    wait_decision_started(seen, started_at=parked + timedelta(hours=1))
    wait_end(task_id=task_id, ended_at=parked + timedelta(hours=2, minutes=30), end="reviewed")
    wait_decision_started(seen, started_at=parked + timedelta(hours=2, minutes=45))
    wait = Wait.objects.get(task_id=task_id)
    assert wait.first_started_at == parked + timedelta(hours=1)
    assert_rollups_match(namespace)
    again = Waiting(**{**seen.__dict__, "task_id": new_id()})
    wait_open(again)
    wait_end(task_id=again.task_id, ended_at=parked + timedelta(hours=1), end="moved")
    wait_decision_started(again, started_at=parked + timedelta(hours=2))
    assert Wait.objects.get(task_id=again.task_id).first_started_at is None
