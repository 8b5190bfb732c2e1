"""What the console records of each decision for insight (docs/insight.md, issue 43 item 4):
every path a decision takes — a review proposed, approved and applied; a retry sent directly
and its new task failing again; proposals rejected, withdrawn and expired; a decision the API
refused; a batch — leaves one fact with the task's handler, queue, last error code and the
moment it entered review, its steps' times and its outcome, written in the act's transaction,
with the rollups equal to what the facts make of them. Real decisions services, the embedded
recovery API in process (a real request through its handler), real SQLite or MariaDB."""

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

import pytest
from asgiref.sync import async_to_sync, sync_to_async
from channels.layers import get_channel_layer
from django.db import transaction
from django.utils import timezone

from orbit_console.client import OrbitClient, Task
from orbit_console.decisions import batches
from orbit_console.decisions.batches import Seen
from orbit_console.decisions.batchworker import work_batches
from orbit_console.decisions.evidence import evidence_policy_set
from orbit_console.decisions.followups import followup_observe
from orbit_console.decisions.models import Batch, BatchState, SubmissionState
from orbit_console.decisions.proposals import (
    expire_due,
    proposal_approve,
    proposal_create,
    proposal_reject,
    proposal_withdraw,
)
from orbit_console.decisions.submissions import DecidedOn, submission_create, submission_send
from orbit_console.insight import sketch
from orbit_console.insight.models import (
    BatchFact,
    ClockTally,
    DecisionFact,
    DecisionTally,
    PrecedentTally,
    Wait,
    WaitTally,
)
from orbit_console.insight.tallies import day_of, hour_of
from orbit_console.insight.waiting import insight_group
from orbit_console.ledger.lifecycle import actor_id_for, attempt_finish, attempt_start
from orbit_console.ledger.models import AttemptOutcome
from orbit_console.ledger.models import Task as LedgerTask
from orbit_console.ledger.seed import seed_incident
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import orbit_client
from tests.approvals.conftest import required_policy
from tests.insight.conftest import assert_rollups_match, body, decided_on, read
from tests.support.orbit import retry_body, review_body
from tests.support.people import TestPerson


def counted(namespace_id: str, action: str, outcome: str) -> int:
    """The day rows' count of (action, outcome) in the namespace."""
    rows = DecisionTally.objects.filter(
        namespace_id=namespace_id, grain="d", action=action, outcome=outcome
    )
    return sum(rows.values_list("n", flat=True))


def clock_values(namespace_id: str, clock: str) -> list[int]:
    """The buckets of a clock's day rows, one per duration counted."""
    rows = ClockTally.objects.filter(namespace_id=namespace_id, grain="d", clock=clock)
    return sorted(bucket for bucket, n in rows.values_list("bucket", "n") for _ in range(n))


def test_a_review_proposed_approved_and_applied_is_one_fact_with_every_step(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    namespace = world["namespace_id"]
    operator, supervisor = people["operator"], people["supervisor"]
    task_id = world["tasks"]["needs_review"]
    # Parked two hours ago; the operator opened the wizard seven minutes ago.
    LedgerTask.objects.filter(id=task_id).update(updated_at=timezone.now() - timedelta(hours=2))
    task, code = read(supervisor, task_id)
    assert code == "connection reset"  # the seed's attempt error, its own code
    started = timezone.now() - timedelta(minutes=7)
    evidence_policy_set(
        namespace_id=namespace,
        pattern=r"evidence:(.+)",
        example="evidence:x",
        link_template="https://evidence.example/{1}",
    )

    proposal = proposal_create(
        action="review",
        task_id=task_id,
        queue_id=task.queue_id,
        namespace_id=namespace,
        expected_revision=task.revision,
        body=body(**review_body(task.revision)),
        proposed_by=operator.user,
        decided_on=decided_on(task, code, started),
    ).proposal
    fact = DecisionFact.objects.get(id=proposal.id)
    assert (fact.outcome, fact.action, fact.declared) == ("pending", "review", "FAILED")
    assert (fact.handler, fact.queue_id, fact.error_code) == ("object.prepare", task.queue_id, code)
    assert fact.waiting_since == task.updated_at and fact.started_at == started
    assert fact.proposed_at == proposal.created_at and fact.evidence_links
    assert fact.decided_by_id == operator.user.pk

    submission = proposal_approve(proposal_id=proposal.id, approver=supervisor.user)
    assert submission is not None
    sent = async_to_sync(submission_send)(submission, actor=supervisor.user)
    assert sent.state == SubmissionState.SUCCEEDED

    fact.refresh_from_db()
    assert fact.outcome == "failed"  # declared FAILED, applied
    assert fact.submission_id == submission.id and fact.approved_by_id == supervisor.user.pk
    assert fact.approved_at is not None and fact.stored_at == submission.created_at
    assert fact.applied_at == fact.settled_at == sent.resolved_at
    # The task waited from when it was parked until the operator opened the wizard, and no
    # longer waits once the review is applied.
    wait = Wait.objects.get(task_id=task_id, revision=int(task.revision))
    assert (wait.entered_at, wait.first_started_at) == (task.updated_at, started)
    assert (wait.end, wait.ended_at, wait.open_task) == ("reviewed", sent.resolved_at, None)
    assert (wait.handler, wait.error_code, wait.origin) == ("object.prepare", code, "decision")
    for outcome in ("proposed", "approved", "failed"):
        assert counted(namespace, "review", outcome) == 1, outcome
    assert clock_values(namespace, "waiting") == [
        sketch.bucket_of((started - task.updated_at) / timedelta(milliseconds=1))
    ]
    assert clock_values(namespace, "deciding") == [
        sketch.bucket_of((fact.proposed_at - started) / timedelta(milliseconds=1))
    ]
    assert len(clock_values(namespace, "approving")) == 1
    # Counted once in the hour and once in the day it happened.
    proposed = DecisionTally.objects.get(namespace_id=namespace, outcome="proposed", grain="h")
    assert proposed.start == hour_of(fact.proposed_at) and proposed.n == 1
    assert PrecedentTally.objects.get(
        namespace_id=namespace, handler="object.prepare", error_code=code, outcome="failed"
    ).start == day_of(fact.settled_at)
    assert_rollups_match(namespace)


def test_a_retry_sent_directly_and_its_new_task_failing_again(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The retry is applied (retried), its new task is followed (docs/events.md) and fails:
    the decision counts a retry that failed again, for the handler's retry success rate."""
    namespace = world["namespace_id"]
    supervisor = people["supervisor"]
    task_id = world["tasks"]["failed"]
    task, code = read(supervisor, task_id)
    assert task.state == "FAILED" and code == "object not found"
    created = submission_create(
        action="retry",
        task_id=task_id,
        queue_id=task.queue_id,
        namespace_id=namespace,
        expected_revision=task.revision,
        body=body(**retry_body(task.revision)),
        created_by=supervisor.user,
        decided_on=decided_on(task, code, timezone.now()),
    )
    sent = async_to_sync(submission_send)(created.submission, actor=supervisor.user)
    assert sent.state == SubmissionState.SUCCEEDED and sent.result_task_id
    fact = DecisionFact.objects.get(id=sent.id)
    assert (fact.outcome, fact.successor_task_id, fact.successor_state) == (
        "retried",
        sent.result_task_id,
        "",
    )
    assert fact.proposed_at is None and fact.stored_at == sent.created_at
    wait = Wait.objects.get(task_id=task_id)
    assert (wait.kind, wait.end, wait.entered_at) == ("retry", "retried", task.completed_at)

    new = LedgerTask.objects.get(id=sent.result_task_id)
    attempt_start(task=new, worker_id="worker-1")
    attempt_finish(
        task=new,
        worker_actor_id=actor_id_for(namespace, "worker-1"),
        outcome=AttemptOutcome.FAILED,
        error="object not found",
    )
    followup_observe(read(supervisor, new.id)[0])

    fact.refresh_from_db()
    assert (fact.successor_state, fact.outcome) == ("FAILED", "retried")
    assert counted(namespace, "retry", "retried") == 1
    assert counted(namespace, "retry", "retry_failed") == 1
    assert clock_values(namespace, "approving") == []  # nothing was proposed
    assert_rollups_match(namespace)


def test_proposals_rejected_withdrawn_and_expired_each_end_their_decision(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    namespace = world["namespace_id"]
    operator, supervisor = people["operator"], people["supervisor"]
    task_ids = seed_incident(
        namespace_id=namespace,
        queue_id=world["queue_id"],
        count=3,
        error="broker outage: channel closed before the ack",
    )
    proposals = []
    for task_id in task_ids:
        task, code = read(supervisor, task_id)
        proposals.append(
            proposal_create(
                action="review",
                task_id=task_id,
                queue_id=task.queue_id,
                namespace_id=namespace,
                expected_revision=task.revision,
                body=body(**review_body(task.revision, outcome="SUCCEEDED")),
                proposed_by=operator.user,
                decided_on=decided_on(task, code, timezone.now()),
            ).proposal
        )
    rejected, withdrawn, expiring = proposals
    proposal_reject(proposal_id=rejected.id, supervisor=supervisor.user, reason="not checked")
    proposal_withdraw(proposal_id=withdrawn.id, person=operator.user)
    # Other modules' tests on this worker may leave proposals due as well: at least this one.
    assert expire_due(expiring.expires_at + timedelta(seconds=1)) >= 1

    outcomes = dict(
        DecisionFact.objects.filter(namespace_id=namespace).values_list("id", "outcome")
    )
    assert outcomes == {
        rejected.id: "rejected",
        withdrawn.id: "withdrawn",
        expiring.id: "expired",
    }
    assert DecisionFact.objects.get(id=rejected.id).error_code == "broker outage"
    for outcome in ("rejected", "withdrawn", "expired"):
        assert counted(namespace, "review", outcome) == 1
    assert counted(namespace, "review", "proposed") == 3
    # Only a supervisor's answer ends the approving clock; the tasks still wait, each from the
    # start of the decision that was not sent.
    assert len(clock_values(namespace, "approving")) == 1
    waits = Wait.objects.filter(task_id__in=task_ids)
    assert [w.is_open for w in waits] == [True] * 3
    assert all(w.first_started_at is not None for w in waits)
    assert_rollups_match(namespace)


def test_a_decision_the_api_refuses_is_counted_as_refused_RV1(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    namespace = world["namespace_id"]
    supervisor = people["supervisor"]
    task_id = world["tasks"]["needs_review"]
    created = submission_create(
        action="review",
        task_id=task_id,
        namespace_id=namespace,
        expected_revision="2",  # not the task's revision: 409 STATE_CONFLICT
        body=body(**review_body("2")),
        created_by=supervisor.user,
        decided_on=DecidedOn(handler="object.prepare", started_at=timezone.now()),
    )
    sent = async_to_sync(submission_send)(created.submission, actor=supervisor.user)
    assert sent.state == SubmissionState.REJECTED and sent.error_code == "STATE_CONFLICT"
    fact = DecisionFact.objects.get(id=sent.id)
    assert (fact.outcome, fact.settled_at) == ("refused", sent.resolved_at)
    # Since when the task waited was not said, and no source told of it: no waiting counted.
    assert not Wait.objects.filter(task_id=task_id).exists()
    assert counted(namespace, "review", "refused") == 1
    assert_rollups_match(namespace)


def read_all(person: TestPerson, task_ids: list[str]) -> list[Seen]:
    credential = OrbitCredential.objects.get(user=person.user)

    async def each() -> list[Seen]:
        orbit: OrbitClient
        async with orbit_client(credential) as orbit:
            found: list[Task] = [await orbit.get_task(task_id) for task_id in task_ids]
        return [Seen(task.id, task) for task in found]

    return async_to_sync(each)()


def decided_batch(
    namespace: str, author: TestPerson, reader: TestPerson, task_ids: list[str]
) -> Batch:
    """A review batch of ``task_ids`` selected (read with ``reader``'s credential), verified and
    decided by ``author``: the confirm step is the caller's."""
    batch = batches.batch_create(
        action="review",
        created_by=author.user,
        namespace_id=namespace,
        selection={"state": "NEEDS_REVIEW"},
        seen=read_all(reader, task_ids),
    )
    batches.batch_verify(batch, person=author.user)
    return batches.batch_decide(
        batch,
        person=author.user,
        decision={
            "reason": "broker outage INC-7: written",
            "evidence_ref": "INC-7",
            "outcome": "SUCCEEDED",
            "result": '{"ok":true}',
            "template": False,
        },
    )


def test_a_batch_is_one_decision_per_task_and_one_batch(
    world: dict[str, Any], people: dict[str, TestPerson], settings: Any
) -> None:
    """Each task's part of a batch is its decision (started when the batch was selected,
    counted by outcome); the batch's proposal, approval and clocks are the batch's, counted
    once; the tasks it recovered and how long it took are the batch's figures."""
    settings.CONSOLE_APPROVAL_POLICY = required_policy()
    namespace = world["namespace_id"]
    operator, supervisor = people["operator"], people["supervisor"]
    task_ids = seed_incident(namespace_id=namespace, queue_id=world["queue_id"], count=3)
    batch = decided_batch(namespace, operator, supervisor, task_ids)
    batch = batches.batch_submit(batch, person=operator.user, typed_count=3)
    assert batch.state == BatchState.PROPOSED
    batch = batches.batch_approve(batch_id=batch.id, approver=supervisor.user)
    batches.batch_store(batch_id=batch.id)
    while async_to_sync(work_batches)():
        pass
    async_to_sync(work_batches)()
    batch.refresh_from_db()
    assert batch.state == BatchState.FINISHED

    facts = list(DecisionFact.objects.filter(batch_id=batch.id))
    assert len(facts) == 3 and {f.outcome for f in facts} == {"succeeded"}
    assert {f.started_at for f in facts} == {batch.created_at}
    assert {f.approved_by_id for f in facts} == {supervisor.user.pk}
    assert all(f.proposed_at is None for f in facts)
    fact = BatchFact.objects.get(id=batch.id)
    assert (fact.tasks, fact.approval, fact.end) == (3, "approved", "finished")
    assert fact.proposed_at == fact.confirmed_at and fact.started_at == batch.started_at
    for outcome in ("selected", "proposed", "approved", "finished"):
        assert counted(namespace, "batch", outcome) == 1, outcome
    assert counted(namespace, "batch", "task_recovered") == 3
    assert counted(namespace, "review", "succeeded") == 3
    assert counted(namespace, "review", "proposed") == 0  # the batch's proposal is the batch's
    assert len(clock_values(namespace, "deciding")) == 1
    assert len(clock_values(namespace, "approving")) == 1
    assert len(clock_values(namespace, "batch")) == 1
    assert len(clock_values(namespace, "waiting")) == 3  # each task waited until the selection
    entered = WaitTally.objects.filter(namespace_id=namespace, grain="d", event="ended_reviewed")
    assert sum(entered.values_list("n", flat=True)) == 3
    assert_rollups_match(namespace)


def test_a_decision_rolled_back_leaves_no_fact_and_no_count(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    namespace = world["namespace_id"]
    task, code = read(people["supervisor"], world["tasks"]["needs_review"])

    class Undo(Exception):
        pass

    with pytest.raises(Undo), transaction.atomic():
        proposal = proposal_create(
            action="review",
            task_id=task.id,
            queue_id=task.queue_id,
            namespace_id=namespace,
            expected_revision=task.revision,
            body=body(**review_body(task.revision)),
            proposed_by=people["operator"].user,
            decided_on=decided_on(task, code, timezone.now()),
        ).proposal
        assert DecisionFact.objects.filter(id=proposal.id).exists()
        raise Undo
    assert not DecisionFact.objects.filter(namespace_id=namespace).exists()
    assert not Wait.objects.filter(namespace_id=namespace).exists()
    assert not DecisionTally.objects.filter(namespace_id=namespace).exists()
    assert not ClockTally.objects.filter(namespace_id=namespace).exists()


def test_figures_moved_in_one_transaction_are_told_once_when_it_commits(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Phase 2's live page hears ``insight.changed`` on the namespace's group once per
    committed transaction that moved its figures: a batch's chunk of three decisions is one
    message, not three; a rolled back act is none."""
    namespace = world["namespace_id"]
    supervisor = people["supervisor"]
    task_ids = seed_incident(namespace_id=namespace, queue_id=world["queue_id"], count=3)

    def prepared() -> str:
        batch = decided_batch(namespace, supervisor, supervisor, task_ids)
        return batches.batch_submit(batch, person=supervisor.user, typed_count=3).id

    def rolled_back() -> None:
        with contextlib.suppress(RuntimeError), transaction.atomic():
            proposal_create(
                action="review",
                task_id=task_ids[0],
                namespace_id=namespace,
                expected_revision="3",
                body=body(**review_body()),
                proposed_by=people["operator"].user,
            )
            raise RuntimeError

    async def heard() -> list[dict[str, Any]]:
        layer = get_channel_layer()
        assert layer is not None
        channel = await layer.new_channel()
        await layer.group_add(insight_group(namespace), channel)
        batch_id = await sync_to_async(prepared)()
        await drain(layer, channel)  # the selection's own message
        await sync_to_async(rolled_back)()
        await sync_to_async(batches.batch_store)(batch_id=batch_id)
        return await drain(layer, channel)

    assert asyncio.run(heard()) == [{"type": "insight.changed", "namespace_id": namespace}]
    assert DecisionFact.objects.filter(namespace_id=namespace).count() == 3


async def drain(layer: Any, channel: str) -> list[dict[str, Any]]:
    found = []
    with contextlib.suppress(TimeoutError):
        while True:
            found.append(await asyncio.wait_for(layer.receive(channel), 0.5))
    return found
