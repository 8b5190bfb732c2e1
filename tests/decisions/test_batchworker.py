"""The batch worker's rounds (docs/bulk.md): a batch whose rounds keep failing is left alone
for a growing pause, logged once with its traceback, while the other batches are sent."""

import logging
from typing import Any

import pytest
from asgiref.sync import async_to_sync

from orbit_console.decisions import batches, batchworker
from orbit_console.decisions.batchworker import MAX_BACKOFF, Backoff, work_batches
from orbit_console.decisions.models import Batch, BatchState, ItemOutcome
from orbit_console.ledger.seed import seed_incident
from tests.decisions.test_batches import DECISION, select
from tests.support.people import TestPerson


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def started(world: dict[str, Any], person: TestPerson, label: str) -> Batch:
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=2, label=label
    )
    batch = select(world, person, incident)
    batches.batch_decide(batch, person=person.user, decision=DECISION)
    return batches.batch_submit(batch, person=person.user, typed_count=2)


def test_a_failing_batch_backs_off_alone_and_logs_its_traceback_once(
    world: dict[str, Any],
    people: dict[str, TestPerson],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    supervisor = people["supervisor"]
    failing, healthy = started(world, supervisor, "fails"), started(world, supervisor, "works")
    rounds: list[str] = []
    real_round = batchworker.work_batch

    async def round_of(batch: Batch) -> int:
        if batch.id == failing.id:
            rounds.append(batch.id)
            raise RuntimeError("this batch's round fails")
        return await real_round(batch)

    monkeypatch.setattr(batchworker, "work_batch", round_of)
    clock = Clock()
    backoff = Backoff(clock)
    caplog.set_level(logging.INFO, logger="orbit.console.batches")

    def round_now() -> None:
        async_to_sync(work_batches)(backoff)

    for _ in range(10):  # the worker's rounds come back at once while items are due
        round_now()
    assert rounds == [failing.id]
    healthy.refresh_from_db()
    assert healthy.state == BatchState.FINISHED  # the other batch was sent meanwhile
    assert batches.outcome_counts(healthy) == {ItemOutcome.APPLIED: 2}

    pauses = []
    for _ in range(12):
        pauses.append(backoff.until[failing.id] - clock.now)
        clock.now = backoff.until[failing.id] - 0.001
        round_now()
        clock.now += 0.001
        round_now()
    assert len(rounds) == 13  # one round per pause, never one in the pause
    assert pauses[:5] == [1.0, 2.0, 4.0, 8.0, 16.0]
    assert max(pauses) == MAX_BACKOFF
    failures = [r for r in caplog.records if failing.id in r.getMessage()]
    assert len(failures) == 13
    assert [r.exc_info is not None for r in failures] == [True] + [False] * 12

    backoff.succeeded(failing.id)
    assert backoff.due(failing.id)
