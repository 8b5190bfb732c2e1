"""POST /v1/tasks/{id}:review — rules RV1-RV7 over real HTTP."""

from typing import Any

import httpx

from orbit_console.ledger.models import OperationAudit, ResultEvent, Task
from tests.support.orbit import error_code, get_task, review


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
    events_before = ResultEvent.objects.filter(task_id=task_id).count()

    response = review(api, world)

    task = Task.objects.get(id=task_id)
    assert task.state == "FAILED" and task.revision == 4 and task.completed_at is not None
    audit = OperationAudit.objects.get(id=response.json()["data"]["audit_id"])
    assert audit.action == "task.review"
    assert ResultEvent.objects.filter(task_id=task_id).count() == events_before + 1


def test_review_of_wrong_revision_is_a_state_conflict_RV1(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    response = review(api, world, revision="2")
    assert response.status_code == 409
    assert error_code(response) == "STATE_CONFLICT"
