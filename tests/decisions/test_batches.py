"""Batches (issue 16, docs/bulk.md): the frozen selection, the decision, exactly once per task,
pause and cancel, backpressure and moved revisions — against the embedded API, in process."""

import importlib
import json
from typing import Any

import pytest
from asgiref.sync import async_to_sync
from django.apps import apps as django_apps
from django.contrib.auth.models import Group
from django.db import DatabaseError, IntegrityError, transaction
from django.utils import timezone

from orbit_console.client import OrbitClient, OrbitError, Task
from orbit_console.decisions import batches
from orbit_console.decisions.batches import Seen
from orbit_console.decisions.batchworker import work_batches
from orbit_console.decisions.models import (
    Approval,
    Batch,
    BatchItem,
    BatchState,
    ConsoleEvent,
    ItemOutcome,
    Submission,
    SubmissionState,
)
from orbit_console.decisions.proposals import ProposalRefused
from orbit_console.ledger.lifecycle import (
    RetryPolicy,
    actor_id_for,
    attempt_finish,
    attempt_start,
    task_accept,
)
from orbit_console.ledger.models import AttemptOutcome, OperationAudit, Queue
from orbit_console.ledger.models import Task as LedgerTask
from orbit_console.ledger.seed import seed_incident, seed_world
from orbit_console.lib import strictjson
from orbit_console.lib.ids import new_id
from orbit_console.lib.recovery_rules import MAX_RESULT_BYTES
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import orbit_client
from tests.approvals.conftest import required_policy
from tests.audit.conftest import statements_refused
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
    """Each task as the person's credential reads it, as the verify step does: a task the API
    answers 404 for is "not found" (``task`` None)."""
    credential = OrbitCredential.objects.get(user=person.user)

    async def read_one(orbit: OrbitClient, task_id: str) -> Seen:
        try:
            return Seen(task_id, await orbit.get_task(task_id))
        except OrbitError as error:
            if error.status != 404:
                raise
            return Seen(task_id, None)

    async def read() -> list[Seen]:
        async with orbit_client(credential) as orbit:
            return [await read_one(orbit, task_id) for task_id in task_ids]

    return async_to_sync(read)()


def needs_review_tasks(
    world: dict[str, Any], count: int, *, handler: str = "object.prepare", business_key: str = ""
) -> list[str]:
    """``count`` NEEDS_REVIEW tasks of the world's queue with this handler and business key
    (``{n}`` in it: the task's number), as an incident leaves them (seed_incident's way)."""
    queue = Queue.objects.get(id=world["queue_id"])
    submitter = actor_id_for(world["namespace_id"], "submitter")
    worker = actor_id_for(world["namespace_id"], "worker-1")
    ids = []
    for n in range(count):
        task = task_accept(
            queue=queue,
            actor_id=submitter,
            handler=handler,
            payload="{}",
            business_key=business_key.format(n=n),
            retry=RetryPolicy(max_attempts=1, attempt_timeout_ms=10_000),
        )
        attempt_start(task=task, worker_id="worker-1")
        task = attempt_finish(
            task=task, worker_actor_id=worker, outcome=AttemptOutcome.UNKNOWN, error="lost"
        )
        ids.append(task.id)
    return ids


def select(  # type: ignore[no-untyped-def]
    world: dict[str, Any],
    person: TestPerson,
    task_ids: list[str],
    action: str = "review",
    *,
    verified: bool = True,
):
    """A frozen selection; ``verified``: its author went through the checklist too (the
    decide step opens only then), when it has anything eligible to verify."""
    batch = batches.batch_create(
        action=action,
        created_by=person.user,
        namespace_id=world["namespace_id"],
        selection={"state": "NEEDS_REVIEW"},
        seen=read_tasks(person, task_ids),
    )
    if verified and batches.eligible_items(batch).exists():
        batch = batches.batch_verify(batch, person=person.user)
    return batch


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
    assert batch.state == BatchState.STARTING
    batch = batches.batch_store(batch_id=batch.id)
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
        "batch.verified",
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
    batches.batch_store(batch_id=batch.id)
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
    assert batch.state == BatchState.STARTING and batch.sent_as_id == supervisor.user.pk
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


# --- Issue 29 -----------------------------------------------------------------------------------


def test_a_batch_with_a_task_not_found_finishes_once_the_others_are_applied(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str]
) -> None:
    """A task the person cannot read is "not found" at verify (C4): left out from the start,
    it is settled as not eligible, and the batch finishes when the readable ones are applied."""
    supervisor = people["supervisor"]
    elsewhere = seed_world(label="not-found")["tasks"]["needs_review"]
    batch = select(world, supervisor, [*incident[:2], elsewhere])
    assert {key: n for key, _label, n in batches.breakdown(batch)[1]} == {"not_found": 1}
    batches.batch_decide(batch, person=supervisor.user, decision=DECISION)
    batches.batch_submit(batch, person=supervisor.user, typed_count=2)
    run_worker()
    batch.refresh_from_db()
    assert batch.state == BatchState.FINISHED and batch.finished_at is not None
    assert batches.outcome_counts(batch) == {ItemOutcome.APPLIED: 2, ItemOutcome.SKIPPED: 1}
    assert ConsoleEvent.objects.filter(batch=batch, kind="batch.finished").count() == 1


def test_cancelling_a_batch_with_a_task_not_found_finishes_it(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str]
) -> None:
    supervisor = people["supervisor"]
    batch = select(world, supervisor, [*incident[:2], new_id()])
    batches.batch_decide(batch, person=supervisor.user, decision=DECISION)
    batches.batch_submit(batch, person=supervisor.user, typed_count=2)
    batch = batches.batch_cancel(batch_id=batch.id, person=supervisor.user)
    batch.refresh_from_db()
    assert batch.state == BatchState.CANCELLED and batch.finished_at is not None
    assert batches.outcome_counts(batch) == {ItemOutcome.CANCELLED: 2, ItemOutcome.SKIPPED: 1}


def test_the_migration_settles_the_not_found_items_of_existing_batches_and_they_finish(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str]
) -> None:
    """Batches started before the fix hold "not found" items without an outcome: the data
    migration settles them, and the worker then finishes their batches (it would also settle
    them itself now, see below)."""
    supervisor = people["supervisor"]
    batch = select(world, supervisor, [*incident[:2], new_id()])
    batches.batch_decide(batch, person=supervisor.user, decision=DECISION)
    batches.batch_submit(batch, person=supervisor.user, typed_count=2)
    stuck = BatchItem.objects.filter(batch=batch, ineligible="not_found")
    stuck.update(outcome="")  # as the verify step stored them until now

    migration = importlib.import_module(
        "orbit_console.decisions.migrations.0004_settle_not_found_items"
    )
    migration.settle_not_found_items(django_apps, None)
    assert set(stuck.values_list("outcome", flat=True)) == {ItemOutcome.SKIPPED}
    run_worker()
    batch.refresh_from_db()
    assert batch.state == BatchState.FINISHED
    assert batches.outcome_counts(batch) == {ItemOutcome.APPLIED: 2, ItemOutcome.SKIPPED: 1}


def test_the_worker_ends_an_item_that_has_no_submission(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str]
) -> None:
    """Whatever left an item of a sending batch without a submission and without an outcome,
    the worker gives it an end (it will never be sent) instead of failing every round."""
    supervisor = people["supervisor"]
    batch = select(world, supervisor, incident[:2])
    batches.batch_decide(batch, person=supervisor.user, decision=DECISION)
    batches.batch_submit(batch, person=supervisor.user, typed_count=2)
    batches.batch_store(batch_id=batch.id)
    orphan = BatchItem.objects.create(
        batch=batch, task_id=new_id(), seen_state="NEEDS_REVIEW", seen_revision="3"
    )
    run_worker()
    batch.refresh_from_db()
    assert batch.state == BatchState.FINISHED
    orphan.refresh_from_db()
    assert orphan.outcome == ItemOutcome.CANCELLED


def test_a_template_is_filled_in_one_pass() -> None:
    """A field's value is never searched for placeholders again: a handler holding
    "{{business_key}}" is written as it is."""
    batch = Batch(action="review", decision=json.dumps(DECISION | {"result": RESULT_OF_ALL}))
    item = BatchItem(
        batch=batch,
        task_id="a" * 32,
        queue_id="b" * 32,
        handler="h{{business_key}}{{id}}",
        business_key="{{revision}}",
        seen_revision="7",
    )
    result = json.loads(batches.item_body(batch, item))["result"]
    assert result == {
        "all": "a" * 32 + "|" + "b" * 32 + "|h{{business_key}}{{id}}|{{revision}}|7",
        "kept": "{{unknown}} {{ id }}",
    }


RESULT_OF_ALL = json.dumps(
    {
        "all": "{{id}}|{{queue_id}}|{{handler}}|{{business_key}}|{{revision}}",
        "kept": "{{unknown}} {{ id }}",
    }
)


def test_a_batch_waits_for_as_many_approvals_as_a_single_proposal(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str], settings: Any
) -> None:
    """One four-eyes policy for both: with two approvers required, one supervisor's approval
    is recorded and the batch waits; the same supervisor cannot count twice; the second
    starts it, sent as that supervisor (AU6)."""
    settings.CONSOLE_APPROVAL_POLICY = required_policy(approvers=2)
    operator, first, second = (
        people["operator"],
        people["supervisor"],
        make_person(world, "supervisor"),
    )
    batch = select(world, operator, incident[:3])
    batches.batch_decide(batch, person=operator.user, decision=DECISION)
    batch = batches.batch_submit(batch, person=operator.user, typed_count=3)
    assert batch.state == BatchState.PROPOSED and batch.required_approvals == 2

    batch = batches.batch_approve(batch_id=batch.id, approver=first.user, note="looks right")
    assert batch.state == BatchState.PROPOSED
    assert not Submission.objects.filter(task_id__in=incident[:3]).exists()
    run_worker()
    assert not OperationAudit.objects.filter(task_id__in=incident, action="task.review").exists()
    with pytest.raises(ProposalRefused, match="already approved"):
        batches.batch_approve(batch_id=batch.id, approver=first.user)
    assert [a.approver_id for a in batches.approvals_of(batch)] == [first.user.pk]
    [awaiting] = [b for b in batches.awaiting_approval(load(first)) if b.id == batch.id]
    assert (awaiting.eligible, awaiting.approved) == (3, 1)

    batch = batches.batch_approve(batch_id=batch.id, approver=second.user, note="agreed")
    assert batch.state == BatchState.STARTING and batch.sent_as_id == second.user.pk
    run_worker()
    batch.refresh_from_db()
    assert batches.outcome_counts(batch) == {ItemOutcome.APPLIED: 3}
    approvals = Approval.objects.filter(batch=batch).order_by("created_at", "id")
    assert [(a.approver_id, a.note) for a in approvals] == [
        (first.user.pk, "looks right"),
        (second.user.pk, "agreed"),
    ]
    events = ConsoleEvent.objects.filter(batch=batch, kind="batch.approved").order_by("seq")
    assert [e.actor_id for e in events] == [first.user.pk, second.user.pk]
    actors = set(
        OperationAudit.objects.filter(task_id__in=incident[:3], action="task.review").values_list(
            "actor_id", flat=True
        )
    )
    assert len(actors) == 1  # the second supervisor's credential sent every item


def test_an_approval_approves_exactly_one_proposal_or_batch(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str]
) -> None:
    """The database holds the one-approvals-model rule: one thing approved, once per person."""
    supervisor = people["supervisor"]
    batch = select(world, people["operator"], incident[:1])
    now = timezone.now()
    with pytest.raises(IntegrityError), transaction.atomic():
        Approval.objects.create(approver=supervisor.user, created_at=now)
    Approval.objects.create(batch=batch, approver=supervisor.user, created_at=now)
    with pytest.raises(IntegrityError), transaction.atomic():
        Approval.objects.create(batch=batch, approver=supervisor.user, created_at=now)


def load(person: TestPerson):  # type: ignore[no-untyped-def]
    from orbit_console.people.person import load_person, user_with_person

    return load_person(user_with_person(person.user.pk))  # type: ignore[arg-type]


# --- A large batch: checked before anything is kept, started in bounded transactions -----------


def test_a_result_too_large_once_filled_is_refused_before_anything_is_kept(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """O5: the API takes a result of at most 256 KiB. A template short enough to type grows
    past that once each task's 200-character handler is filled in: refused at decide, naming
    the task, and at confirm for a decision kept before the check."""
    supervisor = people["supervisor"]
    tasks = needs_review_tasks(world, 3, handler="h" * 200)
    batch = select(world, supervisor, tasks)
    template = json.dumps(["{{handler}}"] * 1400)  # 21 KiB typed, 290 KB filled in
    decision = DECISION | {"result": template}
    assert len(template) < MAX_RESULT_BYTES
    with pytest.raises(batches.ResultTooLarge, match=tasks[0]) as refused:
        batches.batch_decide(batch, person=supervisor.user, decision=decision)
    assert refused.value.field == "result" and "256.0\xa0KB" in str(refused.value)
    batch.refresh_from_db()
    assert batch.decision == ""

    Batch.objects.filter(id=batch.id).update(decision=json.dumps(decision, sort_keys=True))
    batch.refresh_from_db()
    with pytest.raises(ProposalRefused, match=tasks[0]):
        batches.batch_submit(batch, person=supervisor.user, typed_count=3)
    batch.refresh_from_db()
    assert batch.state == BatchState.DRAFT
    assert not Submission.objects.filter(task_id__in=tasks).exists()

    fits = DECISION | {"result": json.dumps(["{{handler}}"] * 1200)}  # 244 KB filled in
    batches.batch_decide(batch, person=supervisor.user, decision=fits)
    batches.batch_submit(batch, person=supervisor.user, typed_count=3)
    run_worker()
    assert batches.outcome_counts(batch) == {ItemOutcome.APPLIED: 3}  # the API took them


def test_the_size_of_a_filled_result_is_counted_exactly(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The check counts instead of filling in: it must count what item_body sends, byte for
    byte, whatever the fields hold (quotes, backslashes, controls, other scripts)."""
    supervisor = people["supervisor"]
    keys = ['quote" back\\slash', "tab\tnew\nline\u0001", "日本語 ключ 🚀", ""]
    tasks = [
        needs_review_tasks(world, 1, handler=f"h{n}.{{{{id}}}}", business_key=key)[0]
        for n, key in enumerate(keys)
    ]
    batch = select(world, supervisor, tasks)
    result = {
        "all": "{{id}}|{{queue_id}}|{{handler}}|{{business_key}}|{{revision}}",
        "{{business_key}}": ["{{business_key}}{{business_key}}", 9007199254740993, {"x": "{{"}],
    }
    decided = DECISION | {"result": json.dumps(result)}
    Batch.objects.filter(id=batch.id).update(decision=json.dumps(decided))
    batch.refresh_from_db()
    sizes = dict(batches.filled_sizes(batch, decided))
    assert len(sizes) == 4
    for item, size in sizes.items():
        sent = strictjson.loads(batches.item_body(batch, item))["result"]
        assert size == len(strictjson.dumps(sent).encode()), item.business_key


def test_a_start_is_stored_in_chunks_and_resumed_after_a_failure_nothing_sent_before(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str], settings: Any
) -> None:
    """C9, I1: each chunk of submissions is its own transaction; a chunk that fails leaves
    nothing of itself, the batch stays starting and sends nothing, and the worker resumes it:
    every task decided exactly once, and no item sent before every submission was stored."""
    settings.CONSOLE_BATCH_START_CHUNK = 2
    supervisor = people["supervisor"]
    batch = select(world, supervisor, incident[:5])
    batches.batch_decide(batch, person=supervisor.user, decision=DECISION)
    batch = batches.batch_submit(batch, person=supervisor.user, typed_count=5)
    assert batch.state == BatchState.STARTING
    assert batches.batch_store_next(batch_id=batch.id) is True
    stored = Submission.objects.filter(task_id__in=incident[:5])
    assert stored.count() == 2
    refused = statements_refused("decisions_batchitem", "UPDATE", "items unavailable (test)")
    with refused, pytest.raises(DatabaseError, match="items unavailable"):
        batches.batch_store_next(batch_id=batch.id)
    assert stored.count() == 2  # the failed chunk left nothing behind
    batch.refresh_from_db()
    assert batch.state == BatchState.STARTING and batch.started_at is None
    assert set(stored.values_list("send_count", flat=True)) == {0}

    run_worker()  # the worker finds it starting: stores the rest, then sends
    batch.refresh_from_db()
    assert batch.state == BatchState.FINISHED
    assert batches.outcome_counts(batch) == {ItemOutcome.APPLIED: 5}
    for task_id in incident[:5]:
        assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1
    events = list(ConsoleEvent.objects.filter(task_id__in=incident[:5]).order_by("seq"))
    started = ConsoleEvent.objects.get(batch=batch, kind="batch.started").seq
    assert max(e.seq for e in events if e.kind == "submission.stored") < started
    assert min(e.seq for e in events if e.kind == "submission.sent") > started


def test_a_starting_batch_can_be_cancelled_and_nothing_of_it_is_sent(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str], settings: Any
) -> None:
    settings.CONSOLE_BATCH_START_CHUNK = 2
    supervisor = people["supervisor"]
    batch = select(world, supervisor, incident[:5])
    batches.batch_decide(batch, person=supervisor.user, decision=DECISION)
    batches.batch_submit(batch, person=supervisor.user, typed_count=5)
    batches.batch_store_next(batch_id=batch.id)
    batch = batches.batch_cancel(batch_id=batch.id, person=supervisor.user)
    assert batches.batch_store_next(batch_id=batch.id) is False  # a resumer stores no more
    run_worker()
    batch.refresh_from_db()
    assert batch.state == BatchState.CANCELLED and batch.finished_at is not None
    assert batches.outcome_counts(batch) == {ItemOutcome.CANCELLED: 5}
    assert not OperationAudit.objects.filter(task_id__in=incident, action="task.review").exists()
    assert Submission.objects.filter(task_id__in=incident[:5]).count() == 2


def test_the_migration_keeps_the_approver_of_batches_approved_before_as_an_approval(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str]
) -> None:
    operator, supervisor = people["operator"], people["supervisor"]
    batch = select(world, operator, incident[:1])
    now = timezone.now()
    Batch.objects.filter(id=batch.id).update(  # as batch_approve left it until now
        state=BatchState.FINISHED, decided_by=supervisor.user, decided_at=now, decision_note="ok"
    )
    migration = importlib.import_module(
        "orbit_console.decisions.migrations.0006_approvals_of_batches"
    )
    migration.approvals_of_approved_batches(django_apps, None)
    migration.approvals_of_approved_batches(django_apps, None)  # once only
    [approval] = Approval.objects.filter(batch=batch)
    assert (approval.approver_id, approval.note, approval.created_at) == (
        supervisor.user.pk,
        "ok",
        now,
    )


def test_deciding_needs_the_verify_checklist_and_an_eligible_task(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str]
) -> None:
    """Issue 30: as for a single task, no decision before the checklist; a batch with nothing
    eligible has nothing to verify or decide."""
    operator = people["operator"]
    batch = select(world, operator, incident[:2], verified=False)
    with pytest.raises(ProposalRefused, match="checklist"):
        batches.batch_decide(batch, person=operator.user, decision=DECISION)
    with pytest.raises(ProposalRefused, match="selected this batch"):
        batches.batch_verify(batch, person=people["supervisor"].user)
    batch = batches.batch_verify(batch, person=operator.user)
    batches.batch_verify(batch, person=operator.user)  # once is recorded once
    assert ConsoleEvent.objects.filter(batch=batch, kind="batch.verified").count() == 1
    batches.batch_decide(batch, person=operator.user, decision=DECISION)

    empty = select(world, operator, [world["tasks"]["failed"]], verified=False)
    with pytest.raises(ProposalRefused, match="nothing to decide"):
        batches.batch_verify(empty, person=operator.user)


def test_only_its_author_discards_a_batch_never_sent_and_nothing_opens_after(
    world: dict[str, Any], people: dict[str, TestPerson], incident: list[str], settings: Any
) -> None:
    settings.CONSOLE_APPROVAL_POLICY = required_policy()
    operator, supervisor = people["operator"], people["supervisor"]
    draft = select(world, operator, incident[:2])
    with pytest.raises(ProposalRefused, match="Only the person"):
        batches.batch_discard(batch_id=draft.id, person=supervisor.user)
    discarded = batches.batch_discard(batch_id=draft.id, person=operator.user)
    assert discarded.state == BatchState.DISCARDED and discarded.finished_at is not None
    with pytest.raises(ProposalRefused):
        batches.batch_decide(discarded, person=operator.user, decision=DECISION)
    with pytest.raises(ProposalRefused):
        batches.batch_discard(batch_id=draft.id, person=operator.user)

    proposed = select(world, operator, incident[2:4])
    batches.batch_decide(proposed, person=operator.user, decision=DECISION)
    proposed = batches.batch_submit(proposed, person=operator.user, typed_count=2)
    batches.batch_discard(batch_id=proposed.id, person=operator.user)
    with pytest.raises(ProposalRefused, match="not open"):
        batches.batch_approve(batch_id=proposed.id, approver=supervisor.user)
    with pytest.raises(ProposalRefused, match="not open"):
        batches.batch_reject(batch_id=proposed.id, supervisor=supervisor.user, reason="late")
    assert not Submission.objects.filter(task_id__in=incident[:4]).exists()

    settings.CONSOLE_APPROVAL_POLICY = {
        action: {"required": False, "approvers": 1} for action in ("review", "retry")
    }
    started = select(world, operator, incident[4:])
    batches.batch_decide(started, person=operator.user, decision=DECISION)
    started = batches.batch_submit(started, person=operator.user, typed_count=2)
    with pytest.raises(ProposalRefused, match="not open"):
        batches.batch_discard(batch_id=started.id, person=operator.user)
    kinds = ConsoleEvent.objects.filter(
        batch_id__in=[draft.id, proposed.id], kind="batch.discarded"
    )
    assert kinds.count() == 2
