"""POST /v1/tasks/{id}:review — rules RV1-RV7 over real HTTP."""

import hashlib
import json
from datetime import timedelta
from decimal import Decimal
from typing import Any

import httpx
import pytest
from django.conf import settings
from django.utils import timezone

from orbit_console.ledger import lifecycle
from orbit_console.ledger.auth import hash_token
from orbit_console.ledger.models import (
    Application,
    Attempt,
    AttemptOutcome,
    AttemptReport,
    Credential,
    IdempotencyRecord,
    OperationAudit,
    OwnerKind,
    Plan,
    PlanTrigger,
    Queue,
    Task,
    TaskEvent,
    TaskState,
)
from orbit_console.lib.ids import new_id
from orbit_console.lib.rfc3339 import format_utc
from tests.support.orbit import (
    REVIEW_REVISION,
    bearer,
    error_code,
    get_task,
    new_key,
    post,
    review,
    review_body,
)


def test_review_declares_outcome_and_returns_receipt_RV4(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    response = review(api, world, outcome="SUCCEEDED")

    assert response.status_code == 200
    body = response.json()
    assert len(body["request_id"]) == 32
    data = body["data"]
    assert data["deduplicated"] is False
    assert data["task"]["state"] == "SUCCEEDED"
    assert data["task"]["revision"] == "4"
    assert data["task"]["effect_uncertain"] is False
    assert data["task"]["id"] == world["tasks"]["needs_review"]


def test_review_keeps_result_numbers_exact_RV3(api: httpx.Client, world: dict[str, Any]) -> None:
    response = review(api, world, result={"n": 9007199254740993})
    raw = '"result":{"n": 9007199254740993}'  # the text exactly as sent, spacing included
    assert raw in response.text
    stored = get_task(api, world["tasks"]["needs_review"], world["tokens"]["admin"])
    assert raw in stored.text


def test_review_writes_task_audit_and_event_in_one_go_RV5(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]
    events_before = TaskEvent.objects.filter(task_id=task_id).count()

    response = review(api, world)

    task = Task.objects.get(id=task_id)
    assert task.state == "FAILED" and task.revision == 4 and task.completed_at is not None
    audit = OperationAudit.objects.get(id=response.json()["data"]["audit_id"])
    assert audit.action == "task.review"
    # The new result event, naming the review and its audit record (docs/events.md).
    new_events = TaskEvent.objects.filter(task_id=task_id).order_by("sequence")[events_before:]
    assert [(e.kind, e.state, e.revision, e.operation, e.audit_id) for e in new_events] == [
        ("task.completed", "FAILED", 4, "task.review", audit.id),
    ]


def test_review_of_wrong_revision_is_a_state_conflict_RV1(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    response = review(api, world, revision="2")
    assert response.status_code == 409
    assert error_code(response) == "STATE_CONFLICT"


# --- Helpers ----------------------------------------------------------------------------------

EXACT_RESULT = (
    '{"sequence": 9007199254740993, "price": 0.10, "hundred": 1E+2, "tiny": 1.5e-7,'
    ' "name": "Zoë 世界 😀", "escaped": "caf\\u00e9\\n",'
    ' "nested": {"list": [0.10, {"deep": [1E+2, true, null, "x"]}], "empty": {}}}'
)


def _review_text(result_text: str, *, outcome: str = "FAILED", **overrides: Any) -> str:
    """A review body whose ``result`` member is ``result_text`` exactly as written."""
    fields = review_body(outcome=outcome, **overrides)
    fields.pop("result")
    return json.dumps(fields, ensure_ascii=False)[:-1] + ', "result": ' + result_text + "}"


def _post_review(
    api: httpx.Client,
    world: dict[str, Any],
    body: dict[str, Any] | str,
    *,
    key: str,
    task: str = "needs_review",
    holder: str = "admin",
) -> httpx.Response:
    """POST a review as the seeded credential ``holder``."""
    return post(api, world["tasks"][task], "review", world["tokens"][holder], body, key=key)


def _exact(text: str) -> Any:
    """Parse JSON without ever going through a float."""
    return json.loads(text, parse_float=Decimal)


def _credential(token: str) -> Credential:
    return Credential.objects.get(token_hash=hash_token(token))


def _ledger_snapshot(task_id: str) -> dict[str, Any]:
    """Everything a refused review must leave alone."""
    task = Task.objects.filter(id=task_id).values().get()
    return {
        "task": task,
        "audits": list(OperationAudit.objects.filter(task_id=task_id).order_by("seq").values()),
        "events": list(TaskEvent.objects.filter(task_id=task_id).order_by("sequence").values()),
        "receipts": IdempotencyRecord.objects.filter(task_id=task_id).count(),
        "queue": Queue.objects.filter(id=task["queue_id"]).values_list("in_use", flat=True).get(),
        "application": Application.objects.filter(id=task["application_id"])
        .values_list("in_use", flat=True)
        .get(),
    }


def _assert_conflict(response: httpx.Response, code: str = "STATE_CONFLICT") -> None:
    assert response.status_code == 409, response.text
    assert error_code(response) == code


def _plan_task_needing_review(world: dict[str, Any]) -> Task:
    """A task a plan's trigger fired, whose only attempt ended with an unknown outcome."""
    queue = Queue.objects.get(id=world["queue_id"])
    task = lifecycle.task_accept_for_plan(
        queue=queue,
        actor_id=lifecycle.actor_id_for(world["namespace_id"], "scheduler"),
        plan_name="nightly export",
        handler="object.export",
        payload='{"object_ref":"objects/nightly"}',
    )
    lifecycle.attempt_start(task=task, worker_id="worker-1")
    return lifecycle.attempt_finish(
        task=task,
        worker_actor_id=lifecycle.actor_id_for(world["namespace_id"], "worker-1"),
        outcome=AttemptOutcome.UNKNOWN,
        error="timeout",
    )


# --- RV1: only a settled NEEDS_REVIEW task at the expected revision ---------------------------


@pytest.mark.parametrize(
    ("task", "revision"),
    [("failed", REVIEW_REVISION), ("succeeded", REVIEW_REVISION), ("cancelled", "2")],
)
def test_review_of_a_task_not_in_needs_review_is_a_state_conflict_RV1(
    api: httpx.Client, world: dict[str, Any], live_db: None, task: str, revision: str
) -> None:
    before = _ledger_snapshot(world["tasks"][task])

    response = review(api, world, task=task, revision=revision)

    _assert_conflict(response)
    assert _ledger_snapshot(world["tasks"][task]) == before


@pytest.mark.parametrize("revision", ["2", "4", "18446744073709551615"])
def test_review_at_any_other_revision_is_a_state_conflict_and_changes_nothing_RV1(
    api: httpx.Client, world: dict[str, Any], live_db: None, revision: str
) -> None:
    before = _ledger_snapshot(world["tasks"]["needs_review"])

    response = review(api, world, revision=revision)

    _assert_conflict(response)
    assert _ledger_snapshot(world["tasks"]["needs_review"]) == before


def test_review_of_a_task_with_a_lease_and_an_active_attempt_is_a_state_conflict_RV1(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review_leased"]
    task = Task.objects.get(id=task_id)
    assert task.lease_id is not None and task.active_attempt_id is not None
    before = _ledger_snapshot(task_id)

    response = review(api, world, task="needs_review_leased")

    _assert_conflict(response)
    assert _ledger_snapshot(task_id) == before


def test_review_of_a_task_holding_only_an_unreleased_permit_is_a_state_conflict_RV1(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review_2"]
    Task.objects.filter(id=task_id).update(permit_id=new_id())
    before = _ledger_snapshot(task_id)
    assert before["task"]["lease_id"] is None and before["task"]["active_attempt_id"] is None

    response = review(api, world, task="needs_review_2")

    _assert_conflict(response)
    assert _ledger_snapshot(task_id) == before


# --- RV2: ownership --------------------------------------------------------------------------


def test_review_of_a_workflow_owned_task_is_a_state_conflict_RV2(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review_workflow"]
    before = _ledger_snapshot(task_id)

    response = review(api, world, task="needs_review_workflow")

    _assert_conflict(response)
    assert _ledger_snapshot(task_id) == before


def test_review_of_a_gated_task_is_a_state_conflict_RV2(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review_2"]
    Task.objects.filter(id=task_id).update(gate_id=new_id())
    before = _ledger_snapshot(task_id)

    response = review(api, world, task="needs_review_2")

    _assert_conflict(response)
    assert _ledger_snapshot(task_id) == before


def test_review_of_a_plan_task_its_plan_and_trigger_confirm_succeeds_RV2(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task = _plan_task_needing_review(world)
    assert task.owner_kind == OwnerKind.PLAN and task.revision == 3

    response = post(api, task.id, "review", world["tokens"]["admin"], review_body())

    assert response.status_code == 200, response.text
    data = response.json()["data"]
    assert data["task"]["state"] == "FAILED"
    assert data["task"]["owner"] == {
        "kind": "PLAN",
        "plan_id": task.owner_id,
        "trigger_id": task.trigger_id,
    }
    assert Task.objects.get(id=task.id).state == TaskState.FAILED


@pytest.mark.parametrize("breakage", ["trigger_deleted", "trigger_of_another_plan", "plan_deleted"])
def test_review_of_a_plan_task_its_plan_and_trigger_do_not_confirm_is_refused_RV2(
    api: httpx.Client, world: dict[str, Any], live_db: None, breakage: str
) -> None:
    task = _plan_task_needing_review(world)
    if breakage == "trigger_deleted":
        PlanTrigger.objects.filter(id=task.trigger_id).delete()
    elif breakage == "trigger_of_another_plan":
        other = Plan.objects.create(
            namespace_id=task.namespace_id, name="another plan", created_at=timezone.now()
        )
        PlanTrigger.objects.filter(id=task.trigger_id).update(plan_id=other.id)
    else:
        Plan.objects.filter(id=task.owner_id).delete()
    before = _ledger_snapshot(task.id)

    response = post(api, task.id, "review", world["tokens"]["admin"], review_body())

    _assert_conflict(response)
    assert _ledger_snapshot(task.id) == before


# --- RV3: the result, exactly ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("outcome", "result_text"),
    [
        ("SUCCEEDED", EXACT_RESULT),
        ("FAILED", EXACT_RESULT),
        ("SUCCEEDED", '"a plain string with \\"quotes\\", é and \\u4e16"'),
        ("FAILED", "0.10"),
        ("SUCCEEDED", "[1E+2, 9007199254740993, -0.0, false]"),
        ("FAILED", "false"),
    ],
)
def test_review_stores_and_returns_the_result_text_exactly_as_sent_RV3(
    api: httpx.Client, world: dict[str, Any], live_db: None, outcome: str, result_text: str
) -> None:
    task_id = world["tasks"]["needs_review"]

    response = _post_review(api, world, _review_text(result_text, outcome=outcome), key=new_key())

    assert response.status_code == 200, response.text
    assert response.json()["data"]["task"]["state"] == outcome
    assert f'"result":{result_text},' in response.text
    stored = get_task(api, task_id, world["tokens"]["reader"])
    assert f'"result":{result_text},' in stored.text
    assert Task.objects.get(id=task_id).result == result_text
    assert TaskEvent.objects.filter(task_id=task_id).latest("sequence").result == result_text


def test_review_result_numbers_keep_their_exact_value_RV3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    response = _post_review(api, world, _review_text(EXACT_RESULT), key=new_key())

    result = _exact(response.text)["data"]["task"]["result"]
    assert result["sequence"] == 9007199254740993
    assert str(result["price"]) == "0.10"
    assert str(result["hundred"]) == "1E+2"
    assert result["name"] == "Zoë 世界 😀"
    assert result["escaped"] == "café\n"
    assert str(result["nested"]["list"][0]) == "0.10"
    assert result["nested"]["list"][1]["deep"] == [Decimal("1E+2"), True, None, "x"]


# --- RV4: the receipt and its replay -----------------------------------------------------------


def test_review_replay_returns_the_original_receipt_even_after_the_task_changed_RV4(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]
    key = new_key()
    first = _post_review(api, world, review_body(), key=key)
    assert first.status_code == 200
    assert first.json()["data"]["deduplicated"] is False
    # Someone else changes the task after the review (here: straight in the database).
    Task.objects.filter(id=task_id).update(revision=9, result='"changed"')

    replay = _post_review(api, world, review_body(), key=key)

    assert replay.status_code == 200, replay.text
    original, again = _exact(first.text)["data"], _exact(replay.text)["data"]
    assert again["deduplicated"] is True
    assert again["audit_id"] == original["audit_id"]
    assert again["task"] == original["task"]
    assert again["task"]["revision"] == "4"
    assert set(again) == {"task", "audit_id", "deduplicated"}
    assert replay.json()["request_id"] != first.json()["request_id"]
    current = get_task(api, task_id, world["tokens"]["reader"]).json()["data"]
    assert current["revision"] == "9"
    assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1


# --- RV5: one transaction, all of it -----------------------------------------------------------


def test_review_releases_one_unit_of_quota_and_records_audit_and_event_RV5(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]
    before = _ledger_snapshot(task_id)
    assert before["task"]["effect_uncertain"] is True
    assert before["task"]["completed_at"] is None
    started = timezone.now()
    body = _review_text(EXACT_RESULT, outcome="SUCCEEDED")

    response = _post_review(api, world, body, key=new_key())

    assert response.status_code == 200, response.text
    after = _ledger_snapshot(task_id)
    assert after["queue"] == before["queue"] - 1
    assert after["application"] == before["application"] - 1
    task = Task.objects.get(id=task_id)
    assert task.state == TaskState.SUCCEEDED
    assert task.revision == 4
    assert task.effect_uncertain is False
    assert task.completed_at is not None and task.completed_at >= started
    assert response.json()["data"]["task"]["completed_at"] == format_utc(task.completed_at)
    new_audits = after["audits"][len(before["audits"]) :]
    assert after["audits"][: len(before["audits"])] == before["audits"]
    assert [audit["action"] for audit in new_audits] == ["task.review"]
    assert new_audits[0]["id"] == response.json()["data"]["audit_id"]
    assert after["receipts"] == before["receipts"] + 1
    new_events = after["events"][len(before["events"]) :]
    assert [event["kind"] for event in new_events] == ["task.completed"]
    completed = new_events[0]
    assert completed["revision"] == 4
    assert completed["state"] == TaskState.SUCCEEDED
    assert completed["result"] == EXACT_RESULT


# --- RV6: history is never rewritten ---------------------------------------------------------


def test_review_leaves_attempts_late_reports_and_earlier_events_untouched_RV6(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]
    attempts = list(Attempt.objects.filter(task_id=task_id).order_by("number").values())
    reports = list(AttemptReport.objects.filter(task_id=task_id).values())
    assert [attempt["outcome"] for attempt in attempts] == [AttemptOutcome.UNKNOWN]
    assert len(reports) == 1
    parked_event = TaskEvent.objects.filter(task_id=task_id, kind="task.needs_review").values()
    parked = parked_event.get()

    response = review(api, world, outcome="SUCCEEDED")

    assert response.status_code == 200
    assert list(Attempt.objects.filter(task_id=task_id).order_by("number").values()) == attempts
    assert list(AttemptReport.objects.filter(task_id=task_id).values()) == reports
    assert parked_event.get() == parked
    latest = TaskEvent.objects.filter(task_id=task_id).latest("sequence")
    assert latest.sequence > parked["sequence"]
    assert latest.revision == 4 > parked["revision"]
    assert latest.state == TaskState.SUCCEEDED
    page = api.get(f"/v1/tasks/{task_id}/attempts", headers=bearer(world["tokens"]["reader"]))
    (item,) = page.json()["data"]["items"]
    assert item["outcome"] == "UNKNOWN"
    assert len(item["late_reports"]) == 1


# --- RV7: the review audit --------------------------------------------------------------------


def test_review_audit_holds_the_new_state_and_a_digest_of_the_exact_result_RV7(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    response = _post_review(api, world, _review_text(EXACT_RESULT), key=new_key())
    audit_id = response.json()["data"]["audit_id"]

    detail = api.get(
        f"/v1/tasks/{task_id}/operations/{audit_id}", headers=bearer(world["tokens"]["auditor"])
    )

    assert detail.status_code == 200, detail.text
    record = _exact(detail.text)["data"]
    assert record["action"] == "task.review"
    assert record["reason"] == review_body()["reason"]
    assert record["evidence_ref"] == review_body()["evidence_ref"]
    digest = "sha256:" + hashlib.sha256(EXACT_RESULT.encode()).hexdigest()
    assert record["after"] == {
        "state": "FAILED",
        "revision": "4",
        "effect_uncertain": False,
        "execution_settled": True,
        "result_digest": digest,
    }
    assert record["before"]["state"] == "NEEDS_REVIEW"
    assert record["before"]["revision"] == "3"
    assert "9007199254740993" not in detail.text  # a digest, not the result


# --- C7, C8: idempotency of the review ---------------------------------------------------------


def test_review_replay_with_reordered_and_respaced_body_returns_the_receipt_C7(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    key = new_key()
    first = _post_review(api, world, review_body(), key=key)
    reordered = json.dumps(dict(reversed(list(review_body().items()))), indent=4)

    replay = _post_review(api, world, "\n  " + reordered + "\n", key=key)

    assert replay.status_code == 200, replay.text
    assert replay.json()["data"]["deduplicated"] is True
    assert replay.json()["data"]["audit_id"] == first.json()["data"]["audit_id"]


@pytest.mark.parametrize(
    "change",
    [
        {"reason": "A different reason"},
        {"outcome": "SUCCEEDED"},
        {"result": {"confirmed": True, "sequence": 9007199254740992}},  # one off: no float compare
    ],
)
def test_review_replay_with_a_different_body_is_an_idempotency_conflict_C7(
    api: httpx.Client, world: dict[str, Any], live_db: None, change: dict[str, Any]
) -> None:
    key = new_key()
    assert _post_review(api, world, review_body(), key=key).status_code == 200
    before = _ledger_snapshot(world["tasks"]["needs_review"])

    response = _post_review(api, world, review_body(**change), key=key)

    _assert_conflict(response, "IDEMPOTENCY_CONFLICT")
    assert _ledger_snapshot(world["tasks"]["needs_review"]) == before


def test_review_with_a_new_key_after_success_is_a_state_conflict_C7(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    assert _post_review(api, world, review_body(), key=new_key()).status_code == 200
    before = _ledger_snapshot(world["tasks"]["needs_review"])

    response = _post_review(api, world, review_body(), key=new_key())

    _assert_conflict(response)
    assert _ledger_snapshot(world["tasks"]["needs_review"]) == before


def test_review_replay_needs_a_currently_valid_credential_C7(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    key = new_key()
    assert _post_review(api, world, review_body(), key=key).status_code == 200
    lifecycle.credential_revoke(credential=_credential(world["tokens"]["admin"]))

    replay = _post_review(api, world, review_body(), key=key)

    assert replay.status_code == 401
    assert error_code(replay) == "UNAUTHENTICATED"


def test_review_replay_is_authorised_again_on_every_call_C7(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    key = new_key()
    first = _post_review(api, world, review_body(), key=key)
    assert first.status_code == 200

    lacking = _post_review(api, world, review_body(), key=key, holder="retrier")
    out_of_scope = _post_review(api, world, review_body(), key=key, holder="other_queue")
    allowed = _post_review(api, world, review_body(), key=key, holder="reviewer")

    assert lacking.status_code == 403
    assert error_code(lacking) == "PERMISSION_DENIED"
    assert out_of_scope.status_code == 404
    assert error_code(out_of_scope) == "NOT_FOUND"
    # The scope is namespace + action + task + key: another reviewer of the namespace replays.
    assert allowed.status_code == 200
    assert allowed.json()["data"]["audit_id"] == first.json()["data"]["audit_id"]
    assert allowed.json()["data"]["deduplicated"] is True


def test_review_receipt_is_kept_for_the_configured_retention_C8(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    assert _post_review(api, world, review_body(), key=new_key()).status_code == 200

    record = IdempotencyRecord.objects.get(task_id=world["tasks"]["needs_review"])

    assert record.action == "task.review"
    retention = timedelta(hours=settings.ORBIT_IDEMPOTENCY_RETENTION_HOURS)
    assert record.expires_at - record.created_at == retention


def test_review_replay_after_the_receipt_expired_is_judged_afresh_C8(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]
    key = new_key()
    assert _post_review(api, world, review_body(), key=key).status_code == 200
    expired = timezone.now() - timedelta(seconds=1)
    assert IdempotencyRecord.objects.filter(task_id=task_id).update(expires_at=expired) == 1

    replay = _post_review(api, world, review_body(), key=key)

    _assert_conflict(replay)  # no receipt any more, and the task has moved on
    assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1


# --- AU6: the actor comes from the credential --------------------------------------------------


def test_review_audit_actor_is_the_credential_actor_AU6(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]
    reviewer = _credential(world["tokens"]["reviewer"])

    response = _post_review(api, world, review_body(), key=new_key(), holder="reviewer")

    audit_id = response.json()["data"]["audit_id"]
    assert OperationAudit.objects.get(id=audit_id).actor_id == reviewer.actor_id
    assert reviewer.actor_id != _credential(world["tokens"]["admin"]).actor_id
    detail = api.get(
        f"/v1/tasks/{task_id}/operations/{audit_id}", headers=bearer(world["tokens"]["auditor"])
    )
    assert detail.json()["data"]["actor_id"] == reviewer.actor_id


def test_review_body_cannot_name_its_own_actor_AU6(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]
    before = _ledger_snapshot(task_id)

    response = _post_review(api, world, review_body(actor_id=new_id()), key=new_key())

    assert response.status_code == 400
    assert error_code(response) == "INVALID_ARGUMENT"
    assert "actor_id" in response.json()["error"]["message"]
    assert _ledger_snapshot(task_id) == before
