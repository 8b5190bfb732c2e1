"""The rollups equal a recomputation from the facts (docs/insight.md, ``tallies.py``).

A property test: decisions of every path, on tasks parked by a worker and sent to the embedded
API in process, and events of Orbit's stream handed to insight's listener — delivered twice,
some out of order — interleaved at random under a clock that jumps hours and days ahead
between steps, so that steps of one decision fall in different UTC hours and days. After it,
every rollup row is what the facts make it (``recompute``), and a rebuild changes nothing.

And concurrent writers of one new rollup row (SQLite's queued writers, MariaDB's row locks):
every increment counted, none lost to the race of two INSERTs."""

import json
import os
import random
import threading
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.core.management import call_command
from django.db import connection, transaction
from django.utils import timezone

from orbit_console.client.events import StreamEvent
from orbit_console.decisions.followups import followup_observe
from orbit_console.decisions.proposals import (
    ProposalRefused,
    expire_due,
    proposal_approve,
    proposal_create,
    proposal_reject,
    proposal_withdraw,
)
from orbit_console.decisions.submissions import submission_create, submission_send
from orbit_console.feed.models import Source
from orbit_console.insight import tallies
from orbit_console.insight.models import DecisionFact, DecisionTally
from orbit_console.insight.waiting import on_event
from orbit_console.ledger.lifecycle import actor_id_for, attempt_finish, attempt_start
from orbit_console.ledger.models import AttemptOutcome
from orbit_console.ledger.models import Task as LedgerTask
from orbit_console.lib.ids import new_id
from tests.insight.conftest import assert_rollups_match, body, decided_on, read
from tests.insight.test_waiting import run_task
from tests.support.orbit import retry_body, review_body
from tests.support.people import TestPerson


class Clock:
    """``timezone.now`` for the whole process, moved ahead by the test."""

    def __init__(self) -> None:
        self.now = timezone.now()

    def __call__(self) -> datetime:
        return self.now

    def jump(self, rng: random.Random) -> None:
        """Minutes or hours ahead, now and then past a day (and a proposal's time)."""
        minutes = 26 * 60 if rng.random() < 0.05 else rng.choice([0, 1, 17, 59, 61, 5 * 60])
        self.now += timedelta(minutes=minutes)


def decide(
    rng: random.Random,
    clock: Clock,
    task_id: str,
    people: dict[str, TestPerson],
    namespace: str,
) -> Any:
    """The steps of one random decision about ``task_id``, as a generator: each ``yield``
    lets the other decisions move (and the clock jump) before the next step."""
    operator, supervisor = people["operator"], people["supervisor"]
    task, code = read(supervisor, task_id)
    action = "review" if task.state == "NEEDS_REVIEW" else "retry"
    decision_body = body(
        **(
            review_body(task.revision, outcome=rng.choice(["SUCCEEDED", "FAILED"]))
            if action == "review"
            else retry_body(task.revision)
        )
    )
    started = clock.now - timedelta(minutes=rng.choice([0, 3, 90]))
    seen = decided_on(task, code, started)
    yield
    path = rng.choice(["direct", "refused", "reject", "withdraw", "expire", "approve", "pending"])
    if path in ("direct", "refused"):
        revision = task.revision if path == "direct" else "99"
        created = submission_create(
            action=action,
            task_id=task_id,
            queue_id=task.queue_id,
            namespace_id=namespace,
            expected_revision=revision,
            body=decision_body if path == "direct" else body(**review_body("99")),
            created_by=supervisor.user,
            decided_on=seen,
        )
        yield
        sent = async_to_sync(submission_send)(created.submission, actor=supervisor.user)
    else:
        proposal = proposal_create(
            action=action,
            task_id=task_id,
            queue_id=task.queue_id,
            namespace_id=namespace,
            expected_revision=task.revision,
            body=decision_body,
            proposed_by=operator.user,
            decided_on=seen,
        ).proposal
        yield
        try:
            if path == "reject":
                proposal_reject(proposal_id=proposal.id, supervisor=supervisor.user, reason="no")
            elif path == "withdraw":
                proposal_withdraw(proposal_id=proposal.id, person=operator.user)
            elif path == "expire":
                expire_due(proposal.expires_at)
            if path != "approve":
                return
            submission = proposal_approve(proposal_id=proposal.id, approver=supervisor.user)
        except ProposalRefused:
            return  # expired meanwhile: the clock jumped past its time
        assert submission is not None
        yield
        sent = async_to_sync(submission_send)(submission, actor=supervisor.user)
    if sent.action == "retry" and sent.result_task_id and rng.random() < 0.7:
        yield
        new = LedgerTask.objects.get(id=sent.result_task_id)
        attempt_start(task=new, worker_id="worker-1")
        attempt_finish(
            task=new,
            worker_actor_id=actor_id_for(namespace, "worker-1"),
            outcome=rng.choice([AttemptOutcome.SUCCEEDED, AttemptOutcome.FAILED]),
            error="again",
        )
        followup_observe(read(supervisor, new.id)[0])


def told(rng: random.Random, clock: Clock, namespace: str, queue_id: str) -> Any:
    """What Orbit's stream tells of a task the console does not decide, each event delivered
    twice (once more after the next): parked, then reviewed or moved on."""
    task_id = new_id()
    source = Source(id=new_id(), namespace_id=namespace)

    def event(kind: str, state: str, revision: int, operation: str) -> StreamEvent:
        return StreamEvent(
            id=new_id(),
            sequence=1,
            type=kind,
            namespace_id=namespace,
            queue_id=queue_id,
            task_id=task_id,
            state=state,
            revision=revision,
            operation=operation,
            audit_id=new_id(),
            occurred_at=clock.now,
        )

    parked = event("task.needs_review", "NEEDS_REVIEW", 3, "task.execution_result")
    with transaction.atomic():
        on_event(source, parked, None, None)
    yield
    ended = rng.choice(
        [
            event("task.completed", "SUCCEEDED", 4, "task.review"),
            event("task.completed", "CANCELLED", 4, "task.cancelled"),
        ]
    )
    for delivered in (ended, parked, ended):
        with transaction.atomic():
            on_event(source, delivered, None, None)


@pytest.mark.parametrize("seed", [int(os.environ.get("INSIGHT_SEED", "43"))])
def test_the_rollups_equal_what_the_facts_make_of_them(
    seed: int,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = random.Random(seed)
    namespace = world["namespace_id"]
    clock = Clock()
    monkeypatch.setattr(timezone, "now", clock)
    tasks = [run_task(world, AttemptOutcome.UNKNOWN, "lost: broker") for _ in range(10)]
    tasks += [run_task(world, AttemptOutcome.FAILED, "SMTP 451: later") for _ in range(5)]
    moving = [decide(rng, clock, task_id, people, namespace) for task_id in tasks]
    moving += [told(rng, clock, namespace, world["queue_id"]) for _ in range(4)]
    steps = 0
    while moving:
        clock.jump(rng)
        step = rng.choice(moving)
        try:
            next(step)
            steps += 1
        except StopIteration:
            moving.remove(step)
    assert steps > 20
    outcomes = set(
        DecisionFact.objects.filter(namespace_id=namespace).values_list("outcome", flat=True)
    )
    assert len(outcomes) >= 5, outcomes  # the paths were many
    days = DecisionTally.objects.filter(namespace_id=namespace, grain="d").values("start")
    assert days.distinct().count() > 1  # the decisions' steps fell on several days
    assert_rollups_match(namespace)
    before = tallies.stored([namespace])
    call_command("insight", "rebuild", "--namespace", namespace)
    assert tallies.stored([namespace]) == before
    call_command("insight", "check", "--namespace", namespace)


def test_concurrent_writers_of_one_new_rollup_row_lose_no_count(live_db: None) -> None:
    """Eight transactions add to one rollup row that none of them finds: each inserts or, when
    another inserted it first, adds to it; all eight are counted."""
    namespace = f"ns-{new_id()}"
    key = ("decision", (namespace, "d", tallies.day_of(timezone.now()), "", "review", "proposed"))
    writers = 8
    ready = threading.Barrier(writers)
    failures: list[BaseException] = []

    def write() -> None:
        try:
            ready.wait(timeout=30)
            with transaction.atomic():
                tallies.apply(Counter({key: 1}))
        except BaseException as error:
            failures.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=write) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not failures, failures
    row = DecisionTally.objects.get(namespace_id=namespace)
    assert row.n == writers
    assert tallies.stored([namespace]) == Counter({key: writers})
    assert json.dumps(row.n) == str(writers)
