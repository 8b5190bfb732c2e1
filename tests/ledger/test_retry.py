"""POST /v1/tasks/{id}:retry — rules RT1-RT9 over real HTTP."""

import json
import math
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.db import IntegrityError, transaction
from django.db.models import F
from django.utils import timezone

from orbit_console.ledger import lifecycle
from orbit_console.ledger.errors import InvalidArgument
from orbit_console.ledger.models import (
    Application,
    AttemptOutcome,
    IdempotencyRecord,
    OperationAudit,
    OwnerKind,
    Queue,
    Task,
    TaskState,
)
from orbit_console.ledger.requests import parse_retry
from orbit_console.ledger.services import _retry_times
from orbit_console.lib.ids import new_id
from tests.support.orbit import (
    CANCELLED_REVISION,
    RETRY_REVISION,
    bearer,
    error_code,
    get_task,
    new_key,
    post,
    retry,
    retry_body,
    review,
)

ATTEMPT_TIMEOUT_MS = 10_000  # the seeded tasks' frozen retry.attempt_timeout_ms

# --- Helpers ----------------------------------------------------------------------------------


def _post_retry(
    api: httpx.Client,
    task_id: str,
    world: dict[str, Any],
    body: dict[str, Any] | str,
    *,
    key: str,
    holder: str = "admin",
) -> httpx.Response:
    """POST a retry of ``task_id`` as the seeded credential ``holder``."""
    return post(api, task_id, "retry", world["tokens"][holder], body, key=key)


def _exact(text: str) -> Any:
    return json.loads(text, parse_float=Decimal)


def _time(text: str) -> datetime:
    assert text.endswith("Z"), text
    return datetime.fromisoformat(text)


def _rfc3339(value: datetime) -> str:
    """RFC 3339 UTC as the API prints it: the fraction without trailing zeros."""
    value = value.astimezone(UTC)
    fraction = f".{value.microsecond:06d}".rstrip("0") if value.microsecond else ""
    return value.strftime("%Y-%m-%dT%H:%M:%S") + fraction + "Z"


def _warm_up(api: httpx.Client, world: dict[str, Any]) -> None:
    """One request first, so that a test measuring time against the server's clock does not
    also measure the server's first-request start-up."""
    assert get_task(api, world["tasks"]["failed"], world["tokens"]["reader"]).status_code == 200


def _actor(world: dict[str, Any], name: str) -> str:
    return lifecycle.actor_id_for(world["namespace_id"], name)


def _failed_task(world: dict[str, Any], **fields: Any) -> Task:
    """A fresh standalone task whose one attempt failed: FAILED at revision 3."""
    queue = Queue.objects.get(id=world["queue_id"])
    fields.setdefault("handler", "object.prepare")
    fields.setdefault("payload", '{"object_ref":"objects/fresh"}')
    task = lifecycle.task_accept(queue=queue, actor_id=_actor(world, "submitter"), **fields)
    return _fail(world, task)


def _fail(world: dict[str, Any], task: Task) -> Task:
    lifecycle.attempt_start(task=task, worker_id="worker-1")
    return lifecycle.attempt_finish(
        task=task,
        worker_actor_id=_actor(world, "worker-1"),
        outcome=AttemptOutcome.FAILED,
        error="object not found",
    )


def _ledger_snapshot(task_id: str) -> dict[str, Any]:
    """Everything a refused retry must leave alone."""
    task = Task.objects.filter(id=task_id).values().get()
    return {
        "task": task,
        "successors": list(Task.objects.filter(retry_of=task_id).values_list("id", flat=True)),
        "audits": list(OperationAudit.objects.filter(task_id=task_id).order_by("seq").values()),
        "receipts": IdempotencyRecord.objects.filter(task_id=task_id).count(),
        "queue": Queue.objects.filter(id=task["queue_id"]).values_list("in_use", flat=True).get(),
        "application": Application.objects.filter(id=task["application_id"])
        .values_list("in_use", flat=True)
        .get(),
    }


def _assert_state_conflict(response: httpx.Response) -> None:
    assert response.status_code == 409, response.text
    assert error_code(response) == "STATE_CONFLICT"


def _assert_invalid(response: httpx.Response, field: str) -> None:
    assert response.status_code == 400, response.text
    assert error_code(response) == "INVALID_ARGUMENT"
    assert field in response.json()["error"]["message"]


# --- RT1: which tasks may be retried ----------------------------------------------------------


@pytest.mark.parametrize("task", ["needs_review", "succeeded", "failed_uncertain"])
def test_retry_of_a_task_that_is_not_settled_and_failed_is_a_state_conflict_RT1(
    api: httpx.Client, world: dict[str, Any], live_db: None, task: str
) -> None:
    task_id = world["tasks"][task]
    before = _ledger_snapshot(task_id)

    response = retry(api, world, task=task)

    _assert_state_conflict(response)
    assert _ledger_snapshot(task_id) == before


@pytest.mark.parametrize("owner", ["workflow", "plan"])
def test_retry_of_an_owned_failed_task_is_a_state_conflict_RT1(
    api: httpx.Client, world: dict[str, Any], live_db: None, owner: str
) -> None:
    queue = Queue.objects.get(id=world["queue_id"])
    fields: dict[str, Any] = {"handler": "object.prepare", "payload": '{"a":1}'}
    if owner == "workflow":
        task = lifecycle.task_accept(
            queue=queue,
            actor_id=_actor(world, "workflow-controller"),
            owner_kind=OwnerKind.WORKFLOW,
            owner_id=new_id(),
            **fields,
        )
    else:
        task = lifecycle.task_accept_for_plan(
            queue=queue, actor_id=_actor(world, "scheduler"), plan_name="nightly", **fields
        )
    task = _fail(world, task)
    assert task.state == TaskState.FAILED and not task.effect_uncertain
    before = _ledger_snapshot(task.id)

    response = _post_retry(api, task.id, world, retry_body(), key=new_key())

    _assert_state_conflict(response)
    assert _ledger_snapshot(task.id) == before


@pytest.mark.parametrize("revision", ["2", "4"])
def test_retry_at_any_other_revision_is_a_state_conflict_RT1(
    api: httpx.Client, world: dict[str, Any], live_db: None, revision: str
) -> None:
    before = _ledger_snapshot(world["tasks"]["failed"])

    response = retry(api, world, revision=revision)

    _assert_state_conflict(response)
    assert _ledger_snapshot(world["tasks"]["failed"]) == before


@pytest.mark.parametrize("held", ["lease_id", "active_attempt_id", "permit_id"])
def test_retry_of_a_task_still_holding_execution_resources_is_a_state_conflict_RT1(
    api: httpx.Client, world: dict[str, Any], live_db: None, held: str
) -> None:
    task = _failed_task(world)
    Task.objects.filter(id=task.id).update(**{held: new_id()})
    before = _ledger_snapshot(task.id)

    response = _post_retry(api, task.id, world, retry_body(), key=new_key())

    _assert_state_conflict(response)
    assert _ledger_snapshot(task.id) == before


def test_retry_of_a_gated_failed_task_is_a_state_conflict_RT1(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task = _failed_task(world)
    Task.objects.filter(id=task.id).update(gate_id=new_id())
    before = _ledger_snapshot(task.id)

    response = _post_retry(api, task.id, world, retry_body(), key=new_key())

    _assert_state_conflict(response)
    assert _ledger_snapshot(task.id) == before


def test_retry_of_a_task_reviewed_as_failed_is_allowed_under_the_same_key_RT1_C7(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    """The review settled the uncertainty; the idempotency scope includes the action, so the
    review's key does not collide with the retry's."""
    key = new_key()
    reviewed = review(api, world, outcome="FAILED", key=key)
    assert reviewed.status_code == 200, reviewed.text

    response = retry(api, world, task="needs_review", revision="4", key=key)

    assert response.status_code == 201, response.text
    assert response.json()["data"]["task"]["retry_of"] == world["tasks"]["needs_review"]
    assert response.json()["data"]["audit_id"] != reviewed.json()["data"]["audit_id"]


def test_retry_of_a_cancelled_task_creates_its_successor_RT1(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    response = retry(api, world, task="cancelled", revision=CANCELLED_REVISION)

    assert response.status_code == 201, response.text
    data = response.json()["data"]
    assert data["source_task_id"] == world["tasks"]["cancelled"]
    assert data["task"]["retry_of"] == world["tasks"]["cancelled"]
    assert data["task"]["state"] == "WAITING"


# --- RT2: the body ----------------------------------------------------------------------------


def test_retry_budget_below_the_frozen_attempt_timeout_is_invalid_RT2(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    before = _ledger_snapshot(world["tasks"]["failed"])

    response = retry(api, world, task_timeout_ms=ATTEMPT_TIMEOUT_MS - 1)

    _assert_invalid(response, "task_timeout_ms")
    assert _ledger_snapshot(world["tasks"]["failed"]) == before


def test_retry_budget_equal_to_the_frozen_attempt_timeout_is_accepted_RT2(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    response = retry(api, world, task_timeout_ms=ATTEMPT_TIMEOUT_MS)

    assert response.status_code == 201, response.text
    task = response.json()["data"]["task"]
    budget = _time(task["deadline_at"]) - _time(task["created_at"])
    assert budget == timedelta(milliseconds=ATTEMPT_TIMEOUT_MS)


@pytest.mark.parametrize("confirmation", [False, "true", 1, None])
def test_retry_needs_safe_to_retry_literally_true_RT2(
    api: httpx.Client, world: dict[str, Any], live_db: None, confirmation: Any
) -> None:
    before = _ledger_snapshot(world["tasks"]["failed"])

    response = retry(api, world, safe_to_retry=confirmation)

    _assert_invalid(response, "safe_to_retry")
    assert _ledger_snapshot(world["tasks"]["failed"]) == before


def test_retry_without_safe_to_retry_is_invalid_RT2(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    body = retry_body()
    del body["safe_to_retry"]

    response = _post_retry(api, world["tasks"]["failed"], world, body, key=new_key())

    _assert_invalid(response, "safe_to_retry")


# --- RT3: times -------------------------------------------------------------------------------


def test_retry_available_at_more_than_a_second_ago_is_invalid_RT3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    _warm_up(api, world)
    before = _ledger_snapshot(world["tasks"]["failed"])
    past = _rfc3339(timezone.now() - timedelta(seconds=2))

    response = retry(api, world, available_at=past)

    _assert_invalid(response, "available_at")
    assert _ledger_snapshot(world["tasks"]["failed"]) == before


def test_retry_available_at_half_a_second_ago_is_accepted_RT3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    _warm_up(api, world)
    past = _rfc3339(timezone.now() - timedelta(milliseconds=500))

    response = retry(api, world, available_at=past)

    assert response.status_code == 201, response.text
    assert response.json()["data"]["task"]["available_at"] == past


def test_retry_available_at_on_or_after_the_new_deadline_is_invalid_RT3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    # The deadline is the server's now + 60 s: two minutes from now is well past it.
    late = _rfc3339(timezone.now() + timedelta(minutes=2))

    response = retry(api, world, task_timeout_ms=60_000, available_at=late)

    _assert_invalid(response, "available_at")


@pytest.mark.parametrize(
    ("available_in", "start_deadline_in"),
    [
        (None, timedelta(seconds=-1)),  # in the past
        (timedelta(seconds=30), timedelta(seconds=10)),  # before available_at
        (None, timedelta(minutes=2)),  # after the deadline (now + 60 s)
    ],
)
def test_retry_start_deadline_outside_its_window_is_invalid_RT3(
    api: httpx.Client,
    world: dict[str, Any],
    live_db: None,
    available_in: timedelta | None,
    start_deadline_in: timedelta,
) -> None:
    now = timezone.now()
    times: dict[str, Any] = {"start_deadline_at": _rfc3339(now + start_deadline_in)}
    if available_in is not None:
        times["available_at"] = _rfc3339(now + available_in)
    before = _ledger_snapshot(world["tasks"]["failed"])

    response = retry(api, world, task_timeout_ms=60_000, **times)

    _assert_invalid(response, "start_deadline_at")
    assert _ledger_snapshot(world["tasks"]["failed"]) == before


def test_retry_start_deadline_equal_to_available_at_is_accepted_RT3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    moment = _rfc3339(timezone.now() + timedelta(seconds=30))

    response = retry(api, world, available_at=moment, start_deadline_at=moment)

    assert response.status_code == 201, response.text
    task = response.json()["data"]["task"]
    assert task["available_at"] == task["start_deadline_at"] == moment


def test_retry_time_window_boundaries_are_inclusive_where_the_rules_say_so_RT3() -> None:
    """RT3 at the exact instants, judged against one fixed ``now`` (over HTTP the server's
    clock cannot be hit to the microsecond)."""
    now = datetime(2026, 9, 17, 0, 0, 0, 500_000, tzinfo=UTC)
    source = Task(retry_attempt_timeout_ms=ATTEMPT_TIMEOUT_MS)

    def check(**fields: Any) -> tuple[datetime, datetime]:
        body = json.dumps(retry_body(task_timeout_ms=60_000, **fields)).encode()
        return _retry_times(source, parse_retry(body), now)

    deadline = now + timedelta(seconds=60)
    assert check() == (deadline, now)
    assert check(start_deadline_at=_rfc3339(deadline)) == (deadline, now)
    one_second_ago = now - timedelta(seconds=1)
    assert check(available_at=_rfc3339(one_second_ago)) == (deadline, one_second_ago)
    with pytest.raises(InvalidArgument, match="available_at"):
        check(available_at=_rfc3339(one_second_ago - timedelta(microseconds=1)))
    with pytest.raises(InvalidArgument, match="available_at"):
        check(available_at=_rfc3339(deadline))
    with pytest.raises(InvalidArgument, match="start_deadline_at"):
        check(start_deadline_at=_rfc3339(deadline + timedelta(microseconds=1)))
    with pytest.raises(InvalidArgument, match="start_deadline_at"):
        check(start_deadline_at=_rfc3339(now))


def test_retry_defaults_available_at_to_now_and_budgets_from_acceptance_RT3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    _warm_up(api, world)
    sent = timezone.now()

    response = retry(api, world, task_timeout_ms=123_457)

    answered = timezone.now()
    assert response.status_code == 201, response.text
    task = response.json()["data"]["task"]
    created = _time(task["created_at"])
    assert sent - timedelta(seconds=1) <= created <= answered + timedelta(seconds=1)
    assert _time(task["available_at"]) == created
    assert _time(task["deadline_at"]) - created == timedelta(milliseconds=123_457)
    assert "start_deadline_at" not in task
    row = Task.objects.get(id=task["id"])
    assert row.deadline_at - row.created_at == timedelta(milliseconds=123_457)


def test_retry_inherits_none_of_the_source_absolute_times_RT3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    long_ago = timezone.now() - timedelta(days=3)
    Task.objects.filter(id=world["tasks"]["failed"]).update(
        available_at=long_ago, start_deadline_at=long_ago, deadline_at=long_ago
    )
    sent = timezone.now()

    response = retry(api, world, task_timeout_ms=60_000)

    assert response.status_code == 201, response.text
    task = response.json()["data"]["task"]
    assert "start_deadline_at" not in task
    assert _time(task["available_at"]) >= sent - timedelta(seconds=1)
    assert _time(task["deadline_at"]) >= sent + timedelta(seconds=59)


def test_retry_keeps_microseconds_of_the_times_it_is_given_RT3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    base = (timezone.now() + timedelta(seconds=20)).replace(microsecond=0)
    available = _rfc3339(base.replace(microsecond=123_456))
    start_deadline = _rfc3339(base.replace(microsecond=654_321) + timedelta(seconds=5))

    response = retry(api, world, available_at=available, start_deadline_at=start_deadline)

    assert response.status_code == 201, response.text
    task = response.json()["data"]["task"]
    assert task["available_at"] == available
    assert task["start_deadline_at"] == start_deadline
    row = Task.objects.get(id=task["id"])
    assert row.available_at.microsecond == 123_456
    assert row.start_deadline_at is not None and row.start_deadline_at.microsecond == 654_321
    again = get_task(api, task["id"], world["tokens"]["reader"]).json()["data"]
    assert (again["available_at"], again["start_deadline_at"]) == (available, start_deadline)


@pytest.mark.parametrize(
    "value",
    ["2026-09-17T00:00:00+00:00", "2026-09-17T00:00:00.1234567Z", "2026-09-17 00:00:00Z"],
)
def test_retry_refuses_times_that_are_not_rfc3339_utc_microseconds_RT3(
    api: httpx.Client, world: dict[str, Any], value: str
) -> None:
    response = retry(api, world, available_at=value)

    _assert_invalid(response, "available_at")


# --- RT4: the receipt and its replay -----------------------------------------------------------


def test_retry_answers_201_then_200_with_the_same_child_on_replay_RT4(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    source_id = world["tasks"]["failed"]
    key = new_key()
    first = _post_retry(api, source_id, world, retry_body(), key=key)

    replay = _post_retry(api, source_id, world, retry_body(), key=key)

    assert first.status_code == 201, first.text
    assert replay.status_code == 200, replay.text
    original, again = _exact(first.text)["data"], _exact(replay.text)["data"]
    assert set(original) == set(again) == {"source_task_id", "task", "audit_id", "deduplicated"}
    assert original["deduplicated"] is False and again["deduplicated"] is True
    assert again["source_task_id"] == original["source_task_id"] == source_id
    assert again["audit_id"] == original["audit_id"]
    assert again["task"] == original["task"]
    assert list(Task.objects.filter(retry_of=source_id).values_list("id", flat=True)) == [
        original["task"]["id"]
    ]
    assert OperationAudit.objects.filter(task_id=source_id, action="task.retry").count() == 1


def test_retry_replay_answers_its_receipt_even_when_its_times_went_stale_RT4(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    _warm_up(api, world)
    """O3: idempotency is decided before the time-dependent checks."""
    key = new_key()
    body = retry_body(available_at=_rfc3339(timezone.now() - timedelta(milliseconds=300)))
    first = _post_retry(api, world["tasks"]["failed"], world, body, key=key)
    assert first.status_code == 201, first.text
    time.sleep(1.2)  # available_at is now more than a second in the past

    replay = _post_retry(api, world["tasks"]["failed"], world, body, key=key)

    assert replay.status_code == 200, replay.text
    assert replay.json()["data"]["audit_id"] == first.json()["data"]["audit_id"]


def test_retry_replay_with_a_different_body_is_an_idempotency_conflict_RT4(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    key = new_key()
    source_id = world["tasks"]["failed"]
    assert _post_retry(api, source_id, world, retry_body(), key=key).status_code == 201
    before = _ledger_snapshot(source_id)

    response = _post_retry(api, source_id, world, retry_body(task_timeout_ms=60_001), key=key)

    assert response.status_code == 409
    assert error_code(response) == "IDEMPOTENCY_CONFLICT"
    assert _ledger_snapshot(source_id) == before


# --- RT5: what the successor copies -----------------------------------------------------------


def test_retry_successor_copies_the_source_and_leaves_it_unchanged_RT5_I2(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    payload = '{"object_ref": "objects/in", "amount": 0.10, "n": 9007199254740993, "s": "é"}'
    source = _failed_task(
        world,
        handler="report.render",
        handler_version="v7",
        payload_version="p3",
        payload=payload,
        business_key="report:2026-09:42",
        concurrency_key="tenant:42",
        priority=7,
        recovery_safety="IDEMPOTENT",
        retry=lifecycle.RetryPolicy(
            max_attempts=4, initial_delay_ms=250, max_delay_ms=8000, attempt_timeout_ms=15_000
        ),
    )
    row_before = Task.objects.filter(id=source.id).values().get()

    response = _post_retry(api, source.id, world, retry_body(task_timeout_ms=90_000), key=new_key())

    assert response.status_code == 201, response.text
    assert f'"payload":{payload},' in response.text
    child = _exact(response.text)["data"]["task"]
    assert child["id"] != source.id and len(child["id"]) == 32
    assert child["retry_of"] == source.id
    # I2: the receipt means the successor is stored, not that it ran.
    assert child["revision"] == "1"
    assert child["attempt_count"] == 0
    assert child["state"] == "WAITING"
    assert child["effect_uncertain"] is False
    assert "result" not in child and "completed_at" not in child
    assert child["owner"] == {"kind": "NONE"}
    expected = {
        "queue_id": source.queue_id,
        "handler": "report.render",
        "handler_version": "v7",
        "payload_version": "p3",
        "business_key": "report:2026-09:42",
        "concurrency_key": "tenant:42",
        "priority": 7,
        "recovery_safety": "IDEMPOTENT",
        "retry": {
            "max_attempts": 4,
            "initial_delay_ms": 250,
            "max_delay_ms": 8000,
            "attempt_timeout_ms": 15_000,
        },
    }
    assert {name: child[name] for name in expected} == expected
    row = Task.objects.get(id=child["id"])
    assert row.payload == payload
    assert row.application_id == source.application_id
    assert row.namespace_id == source.namespace_id
    assert Task.objects.filter(id=source.id).values().get() == row_before


# --- RT6: one direct successor ----------------------------------------------------------------


def test_second_retry_of_the_same_source_names_the_successor_RT6(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    source_id = world["tasks"]["failed"]
    first = _post_retry(api, source_id, world, retry_body(), key=new_key())
    child_id = first.json()["data"]["task"]["id"]
    before = _ledger_snapshot(source_id)

    second = _post_retry(api, source_id, world, retry_body(), key=new_key())

    _assert_state_conflict(second)
    assert child_id in second.json()["error"]["message"]
    assert _ledger_snapshot(source_id) == before


def test_a_further_retry_acts_on_the_failed_successor_RT6(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    source_id = world["tasks"]["failed"]
    first = _post_retry(api, source_id, world, retry_body(), key=new_key())
    child_id = first.json()["data"]["task"]["id"]
    _fail(world, Task.objects.get(id=child_id))

    on_source = _post_retry(api, source_id, world, retry_body(), key=new_key())
    on_child = _post_retry(api, child_id, world, retry_body(), key=new_key())

    _assert_state_conflict(on_source)
    assert on_child.status_code == 201, on_child.text
    data = on_child.json()["data"]
    assert data["source_task_id"] == child_id
    assert data["task"]["retry_of"] == child_id
    assert data["task"]["id"] not in (source_id, child_id)


def _task_row(world: dict[str, Any], **fields: Any) -> Task:
    now = timezone.now()
    source = Task.objects.get(id=world["tasks"]["failed"])
    values: dict[str, Any] = {
        "namespace_id": source.namespace_id,
        "queue_id": source.queue_id,
        "application_id": source.application_id,
        "state": TaskState.WAITING,
        "revision": 1,
        "handler": source.handler,
        "handler_version": source.handler_version,
        "payload_version": source.payload_version,
        "payload": source.payload,
        "recovery_safety": source.recovery_safety,
        "retry_max_attempts": 1,
        "retry_initial_delay_ms": 0,
        "retry_max_delay_ms": 0,
        "retry_attempt_timeout_ms": ATTEMPT_TIMEOUT_MS,
        "available_at": now,
        "deadline_at": now + timedelta(minutes=1),
        "created_at": now,
        "updated_at": now,
    }
    values.update(fields)
    return Task(**values)


def test_database_refuses_a_second_successor_of_one_source_RT6(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    source_id = world["tasks"]["failed"]
    assert _post_retry(api, source_id, world, retry_body(), key=new_key()).status_code == 201

    with pytest.raises(IntegrityError), transaction.atomic():
        _task_row(world, retry_of=source_id).save(force_insert=True)

    assert Task.objects.filter(retry_of=source_id).count() == 1


def test_database_refuses_a_task_that_retries_itself_RT6(
    world: dict[str, Any], live_db: None
) -> None:
    task_id = new_id()

    with pytest.raises(IntegrityError), transaction.atomic():
        _task_row(world, id=task_id, retry_of=task_id).save(force_insert=True)

    assert not Task.objects.filter(id=task_id).exists()


def test_database_allows_many_tasks_without_a_retry_source_RT6(
    world: dict[str, Any], live_db: None
) -> None:
    """The unique index must not treat NULL ``retry_of`` values as equal."""
    for _ in range(2):
        _task_row(world).save(force_insert=True)
    assert Task.objects.filter(namespace_id=world["namespace_id"], retry_of=None).count() > 2


# --- RT7: backpressure ------------------------------------------------------------------------


def _assert_full(response: httpx.Response, code: str) -> None:
    assert response.status_code == 429, response.text
    error = response.json()["error"]
    assert error["code"] == code
    assert isinstance(error["retry_after_ms"], int) and error["retry_after_ms"] > 0
    assert response.headers["Retry-After"] == str(math.ceil(error["retry_after_ms"] / 1000))


def test_retry_into_a_full_queue_is_refused_and_can_be_resent_later_RT7(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    source_id = world["tasks"]["queue_full_failed"]
    before = _ledger_snapshot(source_id)
    assert before["queue"] == Queue.objects.get(id=before["task"]["queue_id"]).capacity
    key = new_key()

    refused = _post_retry(api, source_id, world, retry_body(), key=key)

    _assert_full(refused, "QUEUE_FULL")
    assert _ledger_snapshot(source_id) == before
    assert not IdempotencyRecord.objects.filter(task_id=source_id).exists()
    filler = Task.objects.filter(queue_id=before["task"]["queue_id"], state=TaskState.WAITING)
    lifecycle.task_cancel(task=filler[0], actor_id=_actor(world, "submitter"), reason="x")

    accepted = _post_retry(api, source_id, world, retry_body(), key=key)

    assert accepted.status_code == 201, accepted.text
    assert accepted.json()["data"]["task"]["retry_of"] == source_id
    assert Queue.objects.get(id=before["task"]["queue_id"]).in_use == before["queue"]


def test_retry_beyond_the_application_quota_is_refused_RT7(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    source_id = world["tasks"]["failed"]
    application_id = Task.objects.get(id=source_id).application_id
    quota = Application.objects.get(id=application_id).quota
    Application.objects.filter(id=application_id).update(quota=F("in_use"))
    before = _ledger_snapshot(source_id)
    key = new_key()

    refused = _post_retry(api, source_id, world, retry_body(), key=key)

    _assert_full(refused, "APPLICATION_FULL")
    assert _ledger_snapshot(source_id) == before
    assert not IdempotencyRecord.objects.filter(task_id=source_id).exists()
    Application.objects.filter(id=application_id).update(quota=quota)

    accepted = _post_retry(api, source_id, world, retry_body(), key=key)

    assert accepted.status_code == 201, accepted.text
    assert Application.objects.get(id=application_id).in_use == before["application"] + 1


def test_retry_replay_still_answers_when_the_queue_is_full_now_RT7_C7(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    source_id = world["tasks"]["failed"]
    key = new_key()
    first = _post_retry(api, source_id, world, retry_body(), key=key)
    assert first.status_code == 201
    Queue.objects.filter(id=world["queue_id"]).update(capacity=F("in_use"))

    replay = _post_retry(api, source_id, world, retry_body(), key=key)
    another = retry(api, world, task="cancelled", revision=CANCELLED_REVISION)

    assert replay.status_code == 200, replay.text
    assert replay.json()["data"]["deduplicated"] is True
    assert replay.json()["data"]["task"]["id"] == first.json()["data"]["task"]["id"]
    _assert_full(another, "QUEUE_FULL")  # the queue really is full


def test_retry_counts_the_successor_against_queue_and_application_RT7(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    before = _ledger_snapshot(world["tasks"]["failed"])

    response = retry(api, world)

    assert response.status_code == 201
    after = _ledger_snapshot(world["tasks"]["failed"])
    assert after["queue"] == before["queue"] + 1
    assert after["application"] == before["application"] + 1


# --- RT8: business idempotency ----------------------------------------------------------------


def test_retry_keeps_the_business_key_of_the_source_RT8(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    source = Task.objects.get(id=world["tasks"]["failed"])
    assert source.business_key

    response = retry(api, world)

    child = response.json()["data"]["task"]
    assert child["business_key"] == source.business_key
    assert Task.objects.get(id=child["id"]).business_key == source.business_key
    listed = api.get(
        "/v1/tasks",
        params={"business_key": source.business_key},
        headers=bearer(world["tokens"]["reader"]),
    )
    assert {item["id"] for item in listed.json()["data"]["items"]} == {source.id, child["id"]}


# --- RT9: audit and retry_of ------------------------------------------------------------------


def test_retry_audit_lives_on_the_source_RT9(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    source_id = world["tasks"]["failed"]
    response = retry(api, world, task_timeout_ms=45_000, token=world["tokens"]["retrier"])
    data = response.json()["data"]

    detail = api.get(
        f"/v1/tasks/{source_id}/operations/{data['audit_id']}",
        headers=bearer(world["tokens"]["auditor"]),
    )

    assert detail.status_code == 200, detail.text
    record = detail.json()["data"]
    assert record["action"] == "task.retry"
    assert record["task_id"] == source_id
    assert record["reason"] == retry_body()["reason"]
    assert record["evidence_ref"] == retry_body()["evidence_ref"]
    assert record["after"] == {
        "source_task_id": source_id,
        "retry_task_id": data["task"]["id"],
        "safe_to_retry": True,
        "task_timeout_ms": 45_000,
    }
    assert record["before"]["state"] == "FAILED"
    assert record["before"]["revision"] == RETRY_REVISION
    assert record["actor_id"] == _actor(world, "retrier")  # the credential's actor (AU6)


def test_retry_successor_acceptance_audit_names_its_source_and_the_retry_O2_RT9(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    source_id = world["tasks"]["failed"]
    data = retry(api, world).json()["data"]
    child_id = data["task"]["id"]
    headers = bearer(world["tokens"]["auditor"])

    page = api.get(f"/v1/tasks/{child_id}/operations", headers=headers).json()["data"]

    (item,) = page["items"]
    assert item["action"] == "task.accepted"
    detail = api.get(f"/v1/tasks/{child_id}/operations/{item['id']}", headers=headers)
    record = detail.json()["data"]
    assert record["before"] is None
    assert record["after"]["retry_of"] == source_id
    assert record["after"]["audit_id"] == data["audit_id"]
    assert record["after"]["state"] == "WAITING"
    assert record["after"]["revision"] == "1"


def test_retry_of_appears_in_detail_and_receipt_but_never_in_the_list_RT9(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    source_id = world["tasks"]["failed"]
    receipt = retry(api, world).json()["data"]["task"]
    reader = bearer(world["tokens"]["reader"])

    detail = get_task(api, receipt["id"], world["tokens"]["reader"]).json()["data"]
    listed = api.get("/v1/tasks", params={"limit": "100"}, headers=reader).json()["data"]

    assert receipt["retry_of"] == source_id
    assert detail["retry_of"] == source_id
    items = {item["id"]: item for item in listed["items"]}
    assert receipt["id"] in items and source_id in items
    assert all("retry_of" not in item for item in listed["items"])
    assert "retry_of" not in get_task(api, source_id, world["tokens"]["reader"]).json()["data"]
