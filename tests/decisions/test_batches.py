"""Batches (issue 16, docs/bulk.md): the frozen selection, the decision, exactly once per task,
pause and cancel, backpressure and moved revisions — against the embedded API, in process."""

import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.contrib.auth.models import Group

from orbit_console.client import Task
from orbit_console.decisions import batches
from orbit_console.decisions.batches import Seen
from orbit_console.decisions.batchworker import work_batches
from orbit_console.decisions.models import (
    Batch,
    BatchItem,
    BatchState,
    ConsoleEvent,
    ItemOutcome,
    SubmissionState,
)
from orbit_console.decisions.proposals import ProposalRefused
from orbit_console.ledger.models import OperationAudit
from orbit_console.ledger.models import Task as LedgerTask
from orbit_console.ledger.seed import seed_incident
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import orbit_client
from tests.support.orbit import post, review_body
from tests.support.people import TestPerson, make_person

DECISION = {
    "reason": "broker outage INC-7: the objects were written",
    "evidence_ref": "https://status.example/INC-7",
    "outcome": "SUCCEEDED",
    "result": '{"settled":"{{business_key}}","n":9007199254740993}',
    "template": True,
}


def read_tasks(person: TestPerson, task_ids: list[str]) -> list[Seen]:
    credential = OrbitCredential.objects.get(user=person.user)

    async def read() -> list[Seen]:
        async with orbit_client(credential) as orbit:
            return [Seen(task_id, await orbit.get_task(task_id)) for task_id in task_ids]

    return async_to_sync(read)()


def select(world: dict[str, Any], person: TestPerson, task_ids: list[str], action: str = "review"):  # type: ignore[no-untyped-def]
    return batches.batch_create(
        action=action,
        created_by=person.user,
        namespace_id=world["namespace_id"],
        selection={"state": "NEEDS_REVIEW"},
        seen=read_tasks(person, task_ids),
    )


def run_worker() -> None:
    while async_to_sync(work_batches)():
        pass
    async_to_sync(work_batches)()  # the round that finds nothing due finishes the batch


@pytest.fixture
def incident(world: dict[str, Any]) -> list[str]:
    return seed_incident(namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=6)


def test_a_batch_applies_one_review_per_eligible_task_exactly_once(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str]
) -> None:
    """RV4/RV5 per item, C7: one audit record per task however often the worker runs."""
    operator = people["supervisor"]  # approvals are off in the test run: sent directly
    ineligible = [world["tasks"]["failed"], world["tasks"]["needs_review_workflow"]]
    batch = select(world, operator, [*incident, *ineligible])
    eligible, others = batches.breakdown(batch)
    assert eligible == 6
    assert {key: n for key, _label, n in others} == {"state": 1, "owned": 1}

    batches.batch_decide(batch, person=operator.user, decision=DECISION)
    with pytest.raises(ProposalRefused, match="6"):
        batches.batch_submit(batch, person=operator.user, typed_count=8)
    batch = batches.batch_submit(batch, person=operator.user, typed_count=6)
    assert batch.state == BatchState.RUNNING
    # Stored before anything is sent: one submission per eligible item, its own key.
    items = list(BatchItem.objects.filter(batch=batch, ineligible="").select_related("submission"))
    assert all(i.submission and i.submission.send_count == 0 for i in items)
    assert len({i.submission.idempotency_key for i in items if i.submission}) == 6

    run_worker()
    run_worker()
    batch.refresh_from_db()
    assert batch.state == BatchState.FINISHED and batch.finished_at is not None
    assert batches.outcome_counts(batch) == {ItemOutcome.APPLIED: 6, ItemOutcome.SKIPPED: 2}
    for task_id in incident:
        assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1
        task = LedgerTask.objects.get(id=task_id)
        assert task.state == "SUCCEEDED"
    # The template was filled in with each task's own business key, numbers kept exact.
    item = items[0]
    body = json.loads(item.submission.body)  # type: ignore[union-attr]
    assert body["result"]["settled"] == item.business_key
    assert '"n": 9007199254740993' in item.submission.body  # type: ignore[union-attr]
    assert body["expected_revision"] == item.seen_revision
    # The batch is in the console's chain, its items' submissions linked to it.
    events = ConsoleEvent.objects.filter(batch=batch).order_by("seq")
    assert [e.kind for e in events if e.kind.startswith("batch.")] == [
        "batch.selected",
        "batch.started",
        "batch.finished",
    ]
    stored = {e.task_id for e in events if e.kind == "submission.stored"}
    assert stored == set(incident)


def test_a_task_that_moved_since_selection_ends_changed_and_is_never_re_pinned(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str], api: Any
) -> None:
    """I6, RV1: the worker does not send a new revision; the item ends 'changed'."""
    supervisor = people["supervisor"]
    batch = select(world, supervisor, incident[:3])
    # Someone reviews the first task elsewhere after it was selected.
    seen = BatchItem.objects.get(batch=batch, task_id=incident[0]).seen_revision
    moved = post(api, incident[0], "review", world["tokens"]["admin"], review_body(seen))
    assert moved.status_code == 200
    batches.batch_decide(batch, person=supervisor.user, decision=DECISION)
    batches.batch_submit(batch, person=supervisor.user, typed_count=3)
    run_worker()
    item = BatchItem.objects.get(batch=batch, task_id=incident[0])
    assert item.outcome == ItemOutcome.CHANGED and item.error_code == "STATE_CONFLICT"
    assert item.submission.send_count == 1  # type: ignore[union-attr]
    assert OperationAudit.objects.filter(task_id=incident[0], action="task.review").count() == 1
    assert batches.outcome_counts(batch)[ItemOutcome.APPLIED] == 2


def test_pause_sends_nothing_and_cancel_stops_what_is_not_yet_sent(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str]
) -> None:
    supervisor = people["supervisor"]
    batch = select(world, supervisor, incident)
    batches.batch_decide(batch, person=supervisor.user, decision=DECISION)
    batches.batch_submit(batch, person=supervisor.user, typed_count=6)
    batches.batch_pause(batch_id=batch.id, person=supervisor.user)
    run_worker()
    assert not OperationAudit.objects.filter(task_id__in=incident, action="task.review").exists()
    batch = batches.batch_cancel(batch_id=batch.id, person=supervisor.user)
    batch.refresh_from_db()
    assert batch.state == BatchState.CANCELLED and batch.finished_at is not None
    assert batches.outcome_counts(batch) == {ItemOutcome.CANCELLED: 6}
    states = set(BatchItem.objects.filter(batch=batch).values_list("submission__state", flat=True))
    assert states == {SubmissionState.CANCELLED}
    run_worker()
    assert not OperationAudit.objects.filter(task_id__in=incident, action="task.review").exists()
    with pytest.raises(ProposalRefused):
        batches.batch_resume(batch_id=batch.id, person=supervisor.user)


def test_four_eyes_a_batch_is_one_proposal_nobody_approves_their_own(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str], settings: Any
) -> None:
    settings.CONSOLE_APPROVAL_POLICY = {
        action: {"required": True, "approvers": 1} for action in ("review", "retry")
    }
    operator, supervisor = people["operator"], people["supervisor"]
    batch = select(world, operator, incident)
    batches.batch_decide(batch, person=operator.user, decision=DECISION)
    batch = batches.batch_submit(batch, person=operator.user, typed_count=6)
    assert batch.state == BatchState.PROPOSED
    assert not BatchItem.objects.filter(batch=batch, submission__isnull=False).exists()
    other = make_person(world, "supervisor")
    Group.objects.get_or_create(name="supervisor")
    with pytest.raises(ProposalRefused, match="own"):
        batches.batch_approve(batch_id=batch.id, approver=operator.user)
    with pytest.raises(ProposalRefused, match="supervisor"):
        batches.batch_approve(batch_id=batch.id, approver=make_person(world, "operator").user)
    batch = batches.batch_approve(batch_id=batch.id, approver=supervisor.user, note="checked")
    assert batch.state == BatchState.RUNNING and batch.sent_as_id == supervisor.user.pk
    with pytest.raises(ProposalRefused):
        batches.batch_approve(batch_id=batch.id, approver=other.user)
    run_worker()
    assert batches.outcome_counts(batch) == {ItemOutcome.APPLIED: 6}
    actors = set(
        OperationAudit.objects.filter(task_id__in=incident, action="task.review").values_list(
            "actor_id", flat=True
        )
    )
    assert len(actors) == 1  # the approving supervisor's credential sent every item (AU6)


def test_a_selection_over_the_limit_or_empty_is_refused(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str], settings: Any
) -> None:
    settings.CONSOLE_BATCH_MAX_TASKS = 5
    before = Batch.objects.count()
    with pytest.raises(ProposalRefused, match="at most 5"):
        select(world, people["supervisor"], incident)
    with pytest.raises(ProposalRefused, match="Nothing"):
        select(world, people["supervisor"], [])
    assert Batch.objects.count() == before


def test_eligibility_names_why_a_task_is_left_out() -> None:
    """RV1, RV2, RT1, RT6."""
    base: dict[str, Any] = {"id": "a" * 32, "state": "FAILED", "revision": "3"}
    task = Task.from_json(base)
    assert batches.ineligibility(task, "retry") == ""
    assert batches.ineligibility(task, "review") == "state"
    assert batches.ineligibility(Task.from_json({**base, "effect_uncertain": True}), "retry") == (
        "effect_uncertain"
    )
    assert batches.ineligibility(Task.from_json({**base, "gated": True}), "retry") == "gated"
    plan = Task.from_json({**base, "owner": {"kind": "PLAN"}})
    assert batches.ineligibility(plan, "retry") == "owned"
    successor = Task.from_json({**base, "retry_successor_id": "b" * 32})
    assert batches.ineligibility(successor, "retry") == "successor"
    leased = Task.from_json({**base, "state": "NEEDS_REVIEW", "leased": True})
    assert batches.ineligibility(leased, "review") == "executing"


def test_a_retry_batch_creates_one_successor_per_task_and_holds_on_a_full_queue(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """RT1, RT4-RT6 per item; RT7: a 429 holds the batch for retry_after_ms, nothing is lost."""
    supervisor = people["supervisor"]
    tasks = world["tasks"]
    batch = select(
        world,
        supervisor,
        [
            tasks["failed"],
            tasks["cancelled"],
            tasks["failed_uncertain"],
            tasks["queue_full_failed"],
        ],
        action="retry",
    )
    _, others = batches.breakdown(batch)
    assert {key: n for key, _label, n in others} == {"effect_uncertain": 1}
    decision = {
        "reason": "the earlier execution ended; running it again is safe",
        "evidence_ref": "runbook:INC-7",
        "task_timeout_ms": 60_000,
        "available_at": None,
        "start_deadline_at": None,
    }
    batches.batch_decide(batch, person=supervisor.user, decision=decision)
    batches.batch_submit(batch, person=supervisor.user, typed_count=3)
    async_to_sync(work_batches)()
    batch.refresh_from_db()
    full = BatchItem.objects.select_related("submission").get(
        batch=batch, task_id=tasks["queue_full_failed"]
    )
    assert full.outcome == "" and full.submission.state == SubmissionState.RETRY_LATER  # type: ignore[union-attr]
    assert full.submission.error_code == "QUEUE_FULL"  # type: ignore[union-attr]
    assert batch.hold_until is not None and batch.finished_at is None  # held, not finished
    for key in ("failed", "cancelled"):
        item = BatchItem.objects.select_related("submission").get(batch=batch, task_id=tasks[key])
        assert item.outcome == ItemOutcome.APPLIED
        successor = LedgerTask.objects.get(id=item.submission.result_task_id)  # type: ignore[union-attr]
        assert successor.retry_of == tasks[key] and successor.state == "WAITING"
    # The record links: every entry of the batch verifies under its key.
    from orbit_console.decisions.chain import entry_hash

    for event in ConsoleEvent.objects.filter(batch=batch):
        assert event.entry_hash == entry_hash(event)
