"""The console's feed (``feed/consumer.py``) against a hostile external Orbit (issue 29,
tests/support/hostile.py): the real feed, its real client, over real HTTP and a real
WebSocket, on the test database.

- an event the feed cannot apply — malformed, or what it prompts to read refused as too large,
  malformed or about another task — is set aside (recorded, counted, shown by ``manage.py
  feed``) and acknowledged, and the events behind it are applied on the same connection;
- a consumer held up on a dripping answer, or whose read got no answer, marks its stream
  stalled, which is not live: the looks and the watchers take over; it is live again once an
  event is applied;
- a stream that drops every connection at once is tried ever less often.
"""

import asyncio
import contextlib
import io
import itertools
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.contrib.auth.models import User
from django.core.management import call_command
from django.utils import timezone
from prometheus_client import Counter

from orbit_console.decisions.models import FollowUp, Submission
from orbit_console.feed.consumer import FIRST_PAUSE, HEALTHY_SECONDS, LONGEST_PAUSE, Backoff
from orbit_console.feed.metrics import EVENTS_SET_ASIDE
from orbit_console.feed.models import InboxEvent, SetAsideEvent, Source
from orbit_console.feed.sources import live_namespaces
from orbit_console.lib.ids import new_id
from orbit_console.lib.live import OPERATION_MESSAGE, task_group
from tests.support.feeding import consumed, feeding, until
from tests.support.hostile import (
    Answer,
    HostileOrbit,
    delivery,
    event,
    hostile_orbit,
    operation,
    operation_path,
    task,
)

WAIT = 40.0  # generous: two cores and other suites at once; never a timing assertion


@pytest.fixture
def hostile() -> Iterator[HostileOrbit]:
    with hostile_orbit() as orbit:
        yield orbit


@pytest.fixture
def source(settings: Any, hostile: HostileOrbit, live_db: None) -> Iterator[Source]:
    yield from consumed(settings, hostile)


def live(source: Source) -> bool:
    return source.namespace_id in live_namespaces(now=timezone.now())


def status(source: Source) -> tuple[str, str]:
    """What the console knows of the source's stream: its status and why."""
    row = Source.objects.get(id=source.id)
    return row.status, row.status_note


def counted(counter: Counter, labels: dict[str, str]) -> float:
    for metric in counter.collect():
        for sample in metric.samples:
            if sample.name.endswith("_total") and sample.labels == labels:
                return sample.value
    return 0.0


def followed(task_id: str, namespace_id: str) -> FollowUp:
    """A decision's follow-up of ``task_id``, looked at three times already and not due for an
    hour (the stream is live: the looks leave it to the stream)."""
    person = User.objects.create_user(username=f"feed-{new_id()[:12]}")
    now = timezone.now()
    submission = Submission.objects.create(
        action="retry",
        task_id=new_id(),
        namespace_id=namespace_id,
        expected_revision="1",
        idempotency_key=f"feed-test-{new_id()}",
        body="{}",
        created_by=person,
        sent_as=person,
        created_at=now,
        state="succeeded",
        reconcile_deadline=now + timedelta(hours=1),
        result_task_id=task_id,
    )
    return FollowUp.objects.create(
        submission=submission,
        task_id=task_id,
        namespace_id=namespace_id,
        state="WAITING",
        revision=1,
        seen_at=now,
        next_look_at=now + timedelta(hours=1),
        looks=3,
        deadline=now + timedelta(hours=1),
    )


def feed_command(*args: str) -> str:
    out = io.StringIO()
    call_command("feed", *args, stdout=out)
    return out.getvalue()


def test_events_that_cannot_be_applied_are_set_aside_and_hold_up_none_behind_them(
    hostile: HostileOrbit, source: Source
) -> None:
    """Issue 29: an event missing a key tore the stream down, reconnected about once a second
    and blocked every later event, never acknowledged nor set aside; a 200 MB operation answer
    was read whole; an operation of another task was published to that task's timeline. Each
    is set aside now (recorded, counted, shown) and acknowledged, on the one connection, and the
    event behind them is applied and published to its own task's timeline only."""
    namespace = source.namespace_id
    other_task, mismatched_task, large_task, broken_task, good_task = (new_id() for _ in "12345")
    audit = {name: new_id() for name in ("mismatched", "large", "broken", "good")}
    follow_up = followed(mismatched_task, namespace)
    no_task = {
        key: value
        for key, value in event(task_id=new_id(), audit_id=new_id(), namespace_id=namespace).items()
        if key != "task_id"
    }
    events = {
        "malformed": no_task,
        "mismatched": event(
            task_id=mismatched_task, audit_id=audit["mismatched"], namespace_id=namespace
        ),
        "large": event(task_id=large_task, audit_id=audit["large"], namespace_id=namespace),
        "broken": event(task_id=broken_task, audit_id=audit["broken"], namespace_id=namespace),
        "good": event(task_id=good_task, audit_id=audit["good"], namespace_id=namespace),
    }
    # The followed task reads well; its event's record is another task's.
    hostile.answers[f"/v1/tasks/{mismatched_task}"] = Answer.data(task(mismatched_task, namespace))
    hostile.answers[operation_path(mismatched_task, audit["mismatched"])] = Answer.data(
        operation(other_task, audit["mismatched"])
    )
    hostile.answers[operation_path(large_task, audit["large"])] = Answer.endless()
    broken = operation(broken_task, audit["broken"])
    del broken["created_at"]
    hostile.answers[operation_path(broken_task, audit["broken"])] = Answer.data(broken)
    hostile.answers[operation_path(good_task, audit["good"])] = Answer.data(
        operation(good_task, audit["good"])
    )
    proofs = [f"proof-{name}" for name in events]
    hostile.send(
        *(delivery(sent, proof=proof) for sent, proof in zip(events.values(), proofs, strict=True))
    )
    reasons = ("malformed_event", "mismatched", "too_large", "malformed")
    before = {reason: counted(EVENTS_SET_ASIDE, {"reason": reason}) for reason in reasons}

    async def scenario() -> list[dict[str, Any]]:
        layer = get_channel_layer()
        assert layer is not None
        channel = await layer.new_channel()
        await layer.group_add(task_group(other_task), channel)
        await layer.group_add(task_group(good_task), channel)
        async with feeding():
            await until(lambda: list(hostile.acks), lambda acks: acks == proofs, "the acks")
        published = []
        with contextlib.suppress(TimeoutError):
            while True:
                published.append(await asyncio.wait_for(layer.receive(channel), 1))
        return published

    published = asyncio.run(scenario())

    assert len(hostile.streams_opened) == 1  # never torn down
    assert [(m["type"], m["operation"]["task_id"]) for m in published] == [
        (OPERATION_MESSAGE, good_task)
    ]
    ids = [sent["id"] for sent in events.values()]
    assert list(InboxEvent.objects.filter(event_id__in=ids).values_list("event_id", flat=True)) == [
        events["good"]["id"]
    ]
    set_aside = SetAsideEvent.objects.filter(source_id=source.id).order_by("set_aside_at")
    assert [(row.event_id, row.task_id, row.reason) for row in set_aside] == [
        (events["malformed"]["id"], "", "malformed_event"),
        (events["mismatched"]["id"], mismatched_task, "mismatched"),
        (events["large"]["id"], large_task, "too_large"),
        (events["broken"]["id"], broken_task, "malformed"),
    ]
    assert [row.detail.split(":")[0] for row in set_aside] == [
        "event.task_id",
        "a bad answer (mismatched)",
        "a bad answer (too_large)",
        "a bad answer (malformed)",
    ]
    for reason in reasons:
        assert counted(EVENTS_SET_ASIDE, {"reason": reason}) == before[reason] + 1
    # The set-aside event's re-read is owed to the decision that follows its task: a look.
    follow_up.refresh_from_db()
    assert follow_up.looks <= 1 and not follow_up.ended
    assert status(source)[0] == "live"
    listed = feed_command("list")
    assert f"{namespace} {source.subscription_id} live" in listed
    assert "set aside: 4 event(s)" in listed
    shown = feed_command("set-aside", "--limit", "4")
    assert f"mismatched event={events['mismatched']['id']} task={mismatched_task}" in shown
    assert "too_large" in shown and "malformed_event" in shown


def test_a_consumer_held_up_by_a_dripping_answer_stops_counting_as_live(
    hostile: HostileOrbit, source: Source, settings: Any
) -> None:
    """Issue 29: a server dripping one byte per 5 s held the consumer for minutes with its source
    still "live", so polling never took over. A consumer held up on one event as long as the
    lease marks its stream stalled, whatever the client's deadline (long here)."""
    settings.ORBIT_API_TIMEOUT = 120.0
    task_id, audit_id = new_id(), new_id()
    path = operation_path(task_id, audit_id)
    hostile.answers[path] = Answer.drip(operation(task_id, audit_id), every=0.5)

    async def scenario() -> tuple[str, str]:
        async with feeding():
            await until(lambda: live(source), bool, "the stream live")
            hostile.send(
                delivery(
                    event(task_id=task_id, audit_id=audit_id, namespace_id=source.namespace_id),
                    proof="proof-dripped",
                )
            )
            stalled = await until(
                lambda: status(source), lambda said: said[0] == "stalled", "the stream"
            )
            assert not live(source)
            (served,) = hostile.served_for(path)
            assert not served.finished and not served.hung_up  # still dripping
            listed = await sync_to_async(feed_command)("list")
            assert f"{source.namespace_id} {source.subscription_id} stalled" in listed
            assert "  why: held up on one event since its delivery" in listed
            return stalled

    stalled = asyncio.run(scenario())

    assert stalled == ("stalled", "held up on one event since its delivery")
    assert "proof-dripped" not in hostile.acks


def test_an_unanswered_read_stalls_the_stream_until_an_event_is_applied_again(
    hostile: HostileOrbit, source: Source, settings: Any
) -> None:
    """The read of an event ends at the client's deadline (``ORBIT_API_TIMEOUT_SECONDS``): the
    event is left unacknowledged (it comes again) and the stream is stalled, not live. Delivered
    again and read, it is applied and the stream is live again. An event whose read gets no
    answer on its ``SET_ASIDE_AFTER``-th delivery is set aside."""
    settings.ORBIT_API_TIMEOUT = 2.0
    settings.CONSOLE_FEED_LEASE_SECONDS = 5  # longer than the deadline: the read ends first
    namespace = source.namespace_id
    task_id, audit_id = new_id(), new_id()
    path = operation_path(task_id, audit_id)
    hostile.answers[path] = Answer.drip(operation(task_id, audit_id), every=0.5)
    first = event(task_id=task_id, audit_id=audit_id, namespace_id=namespace)
    unanswered_task, unanswered_audit = new_id(), new_id()
    hostile.answers[operation_path(unanswered_task, unanswered_audit)] = Answer.raw(
        b'{"error": {"code": "UNAVAILABLE", "message": "later"}}', 503
    )
    unanswered = event(task_id=unanswered_task, audit_id=unanswered_audit, namespace_id=namespace)

    async def scenario() -> tuple[tuple[str, str], tuple[str, str]]:
        async with feeding():
            await until(lambda: live(source), bool, "the stream live")
            hostile.send(delivery(first, proof="proof-1", attempt=1))
            stalled = await until(
                lambda: status(source), lambda said: said[0] == "stalled", "the stream"
            )
            assert not live(source)
            assert "proof-1" not in hostile.acks
            # Its lease ran out: the event comes again, and its record reads well now.
            hostile.answers[path] = Answer.data(operation(task_id, audit_id))
            hostile.send(delivery(first, proof="proof-2", attempt=2))
            await until(lambda: list(hostile.acks), lambda acks: "proof-2" in acks, "the ack")
            await until(lambda: live(source), bool, "the stream live again")
            hostile.send(delivery(unanswered, proof="proof-5", attempt=5))
            await until(lambda: list(hostile.acks), lambda acks: "proof-5" in acks, "the ack")
            return stalled, status(source)

    stalled, again = asyncio.run(scenario())

    assert stalled == (
        "stalled",
        f"event {first['id']} not read: outcome unknown: no whole answer within 2 s",
    )
    assert again[0] == "live"
    assert InboxEvent.objects.filter(event_id=first["id"]).exists()
    aside = SetAsideEvent.objects.get(event_id=unanswered["id"])
    assert (aside.reason, aside.attempt, aside.task_id) == ("unanswered", 5, unanswered_task)
    assert aside.detail == "outcome unknown: the server answered 503"


def test_a_stream_that_drops_every_connection_at_once_is_tried_ever_less_often(
    hostile: HostileOrbit, source: Source
) -> None:
    """Issue 29: the pause went back to 1 s on every connection, so a stream that accepts and
    drops at once was reconnected about once a second. The pause grows (jittered: half to all
    of 1, 2, 4 s...) while connections keep failing soon after they open."""
    hostile.close_at_once = True

    async def scenario() -> tuple[str, str]:
        async with feeding():
            await until(lambda: len(hostile.streams_opened), lambda n: n >= 4, "connections")
            # Between two connections (the pause is 2 s at least by now):
            down = await until(lambda: status(source), lambda said: said[0] == "down", "status")
            assert not live(source)
            return down

    down = asyncio.run(scenario())

    opened = hostile.streams_opened
    gaps = [later - earlier for earlier, later in itertools.pairwise(opened)]
    assert gaps[1] >= 1.0 and gaps[2] >= 2.0, gaps
    assert down == ("down", "stream lost (4503): gone again")


def test_the_backoff_starts_over_only_once_a_connection_has_proven_itself() -> None:
    """Doubling from ``FIRST_PAUSE`` to ``LONGEST_PAUSE``, jittered to half of it at least;
    back to the first after a connection that lasted ``HEALTHY_SECONDS`` or applied events."""
    most = Backoff(jitter=lambda: 1.0)
    least = Backoff(jitter=lambda: 0.0)

    pauses = [most.pause(connected_for=0.1) for _ in range(7)]

    assert pauses == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert [least.pause(connected_for=None) for _ in range(3)] == [0.5, 1.0, 2.0]
    assert most.pause(connected_for=HEALTHY_SECONDS - 1) == LONGEST_PAUSE
    assert most.pause(connected_for=HEALTHY_SECONDS) == FIRST_PAUSE
    most.pause(connected_for=None)
    most.proven = True
    assert most.pause(connected_for=0.1) == FIRST_PAUSE
    assert most.pause(connected_for=0.1) == 2 * FIRST_PAUSE
