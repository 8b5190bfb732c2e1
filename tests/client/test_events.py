"""The client of the event stream, ``client/events.py``, against a hostile Orbit (issue 29,
tests/support/hostile.py): a real WebSocket server that sends frames too large, frames that are
not JSON, events that break the stream's schema (the AsyncAPI document), a welcome without its
members, or nothing at all. The well-behaved stream is tested against the real server in
tests/events/test_stream.py."""

import asyncio
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any

import pytest

from orbit_console.client.events import (
    EventStreamConnection,
    MalformedEvent,
    StreamLost,
    open_stream,
)
from orbit_console.lib.ids import new_id
from tests.support.hostile import HostileOrbit, delivery, event, hostile_orbit

NAMESPACE_ID = "9" * 32
TASK_ID = "e" * 32
AUDIT_ID = "a" * 32
WAIT = 20.0  # generous: two cores and other suites at once; never a timing assertion


def run[T](scenario: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return asyncio.run(scenario())


@pytest.fixture
def hostile() -> Iterator[HostileOrbit]:
    with hostile_orbit() as orbit:
        yield orbit


async def connect(orbit: HostileOrbit, **kw: Any) -> EventStreamConnection:
    return await open_stream(orbit.url, "token", orbit.subscription_id, origin=orbit.url, **kw)


def an_event(**overrides: Any) -> dict[str, Any]:
    return {
        **event(task_id=TASK_ID, audit_id=AUDIT_ID, namespace_id=NAMESPACE_ID),
        **overrides,
    }


async def acked(orbit: HostileOrbit, proof: str) -> None:
    deadline = time.monotonic() + WAIT
    while proof not in orbit.acks:
        assert time.monotonic() < deadline, f"{proof} was never acknowledged: {orbit.acks}"
        await asyncio.sleep(0.05)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"task_id": None}, "event.task_id: missing"),
        ({"revision": 3}, "event.revision: not a string"),
        ({"sequence": "-1"}, "event.sequence: not a decimal string"),
        ({"revision": "9" * 5000}, "event.revision: not a decimal string"),
        ({"type": "task.exploded"}, "event.type: not one of"),
        ({"audit_id": "x" * 5000}, "event.audit_id: not an id"),
        ({"retry_of": "../../credential"}, "event.retry_of: not an id"),
        ({"occurred_at": "2030-01-01 00:00:00"}, "event.occurred_at: must be an RFC 3339 time"),
    ],
    ids=[
        "missing-task",
        "numeric-revision",
        "negative-sequence",
        "huge-revision",
        "unknown-type",
        "long-audit-id",
        "retry-of-a-path",
        "local-time",
    ],
)
def test_an_event_that_breaks_the_schema_comes_with_its_proof_and_the_stream_goes_on(
    hostile: HostileOrbit, change: dict[str, Any], reason: str
) -> None:
    """Issue 29: an event missing a key raised ``KeyError`` and tore the stream down. It is
    ``MalformedEvent`` now, with the proof to acknowledge it by, and the next event comes."""
    bad = {key: value for key, value in {**an_event(), **change}.items() if value is not None}
    good = an_event()
    hostile.send(delivery(bad, proof="proof-bad", attempt=2), delivery(good, proof="proof-good"))

    async def scenario() -> tuple[MalformedEvent, Any]:
        async with await connect(hostile) as stream:
            with pytest.raises(MalformedEvent) as caught:
                await asyncio.wait_for(stream.receive(), WAIT)
            await stream.ack(caught.value.proof)
            following = await asyncio.wait_for(stream.receive(), WAIT)
            await acked(hostile, "proof-bad")
            return caught.value, following

    malformed, following = run(scenario)

    assert (malformed.proof, malformed.attempt) == ("proof-bad", 2)
    assert malformed.reason.startswith(reason), malformed.reason
    assert malformed.event_id == bad["id"]
    assert malformed.task_id == bad.get("task_id", "")
    assert (following.proof, following.event.id) == ("proof-good", good["id"])
    assert len(hostile.streams_opened) == 1


def test_an_events_unknown_members_are_kept_as_text_or_dropped(hostile: HostileOrbit) -> None:
    """A newer server's additions do not break the stream."""
    retry_of, retry_audit_id = new_id(), new_id()
    hostile.send(
        delivery(
            an_event(
                type="task.accepted",
                retry_of=retry_of,
                retry_audit_id=retry_audit_id,
                note="new",
                weight=3,
            )
        )
    )

    async def scenario() -> Any:
        async with await connect(hostile) as stream:
            return await asyncio.wait_for(stream.receive(), WAIT)

    received = run(scenario)

    assert received.event.extra == {
        "retry_of": retry_of,
        "retry_audit_id": retry_audit_id,
        "note": "new",
    }


@pytest.mark.parametrize(
    ("frame", "reason"),
    [
        ("not json at all", "the server sent a frame that is not JSON"),
        ("[" * 20_000 + "]" * 20_000, "the server sent a frame that is not JSON"),
        ('["event"]', "the server sent a frame that is not an object"),
        (
            {"type": "event", "delivery": {"attempt": 1}, "event": an_event()},
            "the server sent an event without a proof",
        ),
        (
            {"type": "event", "delivery": {"proof": "p" * 201, "attempt": 1}, "event": an_event()},
            "the server sent an event without a proof",
        ),
    ],
    ids=["text", "deep-nesting", "array", "no-proof", "proof-too-long"],
)
def test_a_frame_that_cannot_be_read_or_acknowledged_ends_the_stream(
    hostile: HostileOrbit, frame: Any, reason: str
) -> None:
    hostile.send(frame)

    async def scenario() -> StreamLost:
        async with await connect(hostile) as stream:
            with pytest.raises(StreamLost) as caught:
                await asyncio.wait_for(stream.receive(), WAIT)
            return caught.value

    assert run(scenario).reason == reason


def test_a_frame_past_the_cap_closes_the_stream_before_it_is_read(hostile: HostileOrbit) -> None:
    """Every frame is capped (``max_frame_bytes``, ``ORBIT_EVENTS_MAX_FRAME_BYTES``): the
    WebSocket library closes the connection (1009) once the frame's header says more."""
    hostile.send({"type": "pong", "padding": "x" * 200_000})

    async def scenario() -> StreamLost:
        async with await connect(hostile, max_frame_bytes=64 * 1024) as stream:
            with pytest.raises(StreamLost) as caught:
                await asyncio.wait_for(stream.receive(), WAIT)
            return caught.value

    lost = run(scenario)

    assert lost.code == 1009


@pytest.mark.parametrize(
    ("welcome", "reason"),
    [
        ({"heartbeat_ms": None}, "no welcome: welcome.heartbeat_ms: missing"),
        ({"heartbeat_ms": "10000"}, "no welcome: welcome.heartbeat_ms: not an integer"),
        ({"capacity": 0}, "no welcome: welcome.capacity: less than 1"),
        ({"type": "pong"}, "no welcome: the first frame is not a welcome but 'pong'"),
    ],
    ids=["no-heartbeat", "text-heartbeat", "no-capacity", "not-a-welcome"],
)
def test_a_welcome_that_breaks_the_schema_is_a_lost_stream_not_a_key_error(
    hostile: HostileOrbit, welcome: dict[str, Any], reason: str
) -> None:
    hostile.welcome = welcome

    with pytest.raises(StreamLost) as caught:
        run(lambda: connect(hostile))

    assert caught.value.reason == reason


def test_a_stream_that_says_nothing_is_lost_after_three_heartbeats() -> None:
    """Issue 29: a stalled server kept the consumer waiting with its source "live". The client
    pings; a server that answers nothing for three heartbeats (at least 3 s) has stalled."""
    with hostile_orbit(heartbeat_ms=1000, pong=False) as hostile:

        async def scenario() -> tuple[StreamLost, float]:
            async with await connect(hostile) as stream:
                started = time.monotonic()
                with pytest.raises(StreamLost) as caught:
                    await asyncio.wait_for(stream.receive(), 60)
                return caught.value, time.monotonic() - started

        lost, waited = run(scenario)

    assert lost.reason == "the server said nothing for 3 s, not even a pong"
    assert 3 <= waited < 60


def test_a_stream_that_answers_its_pings_is_not_lost() -> None:
    with hostile_orbit(heartbeat_ms=200) as hostile:

        async def scenario() -> bool:
            async with await connect(hostile) as stream:
                try:
                    await asyncio.wait_for(stream.receive(), 4)
                except TimeoutError:
                    return True  # nothing came, and nothing broke
            return False

        assert run(scenario)


def test_at_most_a_hundred_proofs_are_handed_back(hostile: HostileOrbit) -> None:
    """The stream closes a connection handed more (4400): a consumer holding more would never
    connect again. The latest are handed back; the others come again after their leases."""
    proofs = [f"proof-{number}" for number in range(150)]

    async def scenario() -> None:
        async with await connect(hostile) as stream:
            await stream.resume(proofs)
            deadline = time.monotonic() + WAIT
            while not hostile.resumes:
                assert time.monotonic() < deadline, "nothing was handed back"
                await asyncio.sleep(0.05)

    run(scenario)

    assert hostile.resumes == [proofs[50:]]
