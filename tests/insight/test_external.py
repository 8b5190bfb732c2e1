"""Tasks waiting for a person against an external Orbit (docs/insight.md): the console's real
feed, in this process, consuming a stream over the network from an Orbit of its own
(tests/support/hostile.py: a real HTTP and WebSocket server that answers what the test says),
reading each task again over HTTP with the feed's credential.

What another Orbit may do: answer the task but not its attempts (an Orbit without the attempts
endpoint: no error code), refuse the task to the feed's credential (the period opened from what
the event says), and list what is in NEEDS_REVIEW for the backfill — or not list at all."""

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from orbit_console.feed.models import Source
from orbit_console.insight.models import Backfill, Wait
from orbit_console.lib.ids import new_id
from tests.insight.conftest import assert_rollups_match
from tests.support.feeding import consumed, feeding, until
from tests.support.hostile import Answer, HostileOrbit, delivery, event, hostile_orbit, task


@pytest.fixture
def hostile() -> Iterator[HostileOrbit]:
    with hostile_orbit() as orbit:
        yield orbit


@pytest.fixture
def source(settings: Any, hostile: HostileOrbit, live_db: None) -> Iterator[Source]:
    yield from consumed(settings, hostile)


def parked(task_id: str, namespace: str, **fields: Any) -> dict[str, Any]:
    return event(
        task_id=task_id,
        audit_id=new_id(),
        namespace_id=namespace,
        event_type="task.needs_review",
        state="NEEDS_REVIEW",
        **fields,
    )


def test_waiting_from_an_external_orbits_stream_and_its_answers(
    hostile: HostileOrbit, source: Source
) -> None:
    namespace = source.namespace_id
    listed, full, bare, refused = (new_id() for _ in range(4))
    in_review = {"state": "NEEDS_REVIEW", "revision": "3"}
    hostile.answers["/v1/tasks"] = Answer.data(
        {"items": [task(listed, namespace, handler="report.export", **in_review)]}
    )
    hostile.answers[f"/v1/tasks/{full}"] = Answer.data(
        task(full, namespace, handler="invoice.send", **in_review)
    )
    attempt = {"id": new_id(), "number": 1, "outcome": "UNKNOWN", "error": "SMTP 451: later"}
    hostile.answers[f"/v1/tasks/{full}/attempts"] = Answer.data({"items": [attempt]})
    # ``bare``: its attempts are not answered (404); ``refused``: nor is the task.
    hostile.answers[f"/v1/tasks/{bare}"] = Answer.data(
        task(bare, namespace, handler="mail.deliver", **in_review)
    )
    reviewed = event(
        task_id=full,
        audit_id=new_id(),
        namespace_id=namespace,
        state="FAILED",
        revision="4",
        operation="task.review",
        occurred_at="2030-01-01T00:10:00Z",
    )
    frames = [parked(full, namespace), parked(bare, namespace), parked(refused, namespace)]
    proofs = [f"proof-{n}" for n in range(4)]
    hostile.send(
        *(
            delivery(sent, proof=proof)
            for sent, proof in zip([*frames, reviewed], proofs, strict=True)
        )
    )

    async def scenario() -> None:
        async with feeding():
            await until(lambda: list(hostile.acks), lambda acks: acks == proofs, "the acks")

    asyncio.run(scenario())

    waits = {w.task_id: w for w in Wait.objects.filter(namespace_id=namespace)}
    assert (waits[listed].origin, waits[listed].handler) == ("backfill", "report.export")
    assert (waits[full].handler, waits[full].error_code) == ("invoice.send", "SMTP 451")
    assert (waits[full].end, waits[full].ended_at.isoformat()) == (
        "reviewed",
        "2030-01-01T00:10:00+00:00",
    )
    assert (waits[bare].handler, waits[bare].error_code, waits[bare].is_open) == (
        "mail.deliver",
        "",
        True,
    )
    assert (waits[refused].handler, waits[refused].is_open) == ("", True)
    assert Backfill.objects.get(namespace_id=namespace).listed == 1
    assert_rollups_match(namespace)


def test_an_orbit_that_does_not_list_its_tasks_leaves_the_backfill_for_later(
    hostile: HostileOrbit, source: Source
) -> None:
    """No answer to the list (404): nothing is backfilled, the stream is consumed all the same,
    and the backfill is tried again at the next connection."""
    task_id = new_id()
    hostile.send(delivery(parked(task_id, source.namespace_id), proof="proof-0"))

    async def scenario() -> None:
        async with feeding():
            await until(lambda: list(hostile.acks), lambda acks: acks == ["proof-0"], "the ack")

    asyncio.run(scenario())
    assert Wait.objects.get(task_id=task_id).is_open
    assert not Backfill.objects.filter(namespace_id=source.namespace_id).exists()
    assert hostile.served_for("/v1/tasks")
