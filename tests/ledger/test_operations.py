"""GET /v1/tasks/{id}/operations[/{audit_id}] — the task operation audit, AU1-AU6 and O2."""

import hashlib
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from orbit_console.ledger.journal import write_audit
from orbit_console.ledger.lifecycle import actor_id_for, credential_issue
from orbit_console.ledger.models import (
    Credential,
    Namespace,
    OperationAudit,
    Permission,
    Queue,
    Task,
)
from orbit_console.ledger.seed import seed_world
from orbit_console.lib.ids import new_id
from tests.support.orbit import (
    bearer,
    error_code,
    get_task,
    retry,
    review,
    review_body,
)

ITEM_FIELDS = {"id", "task_id", "operation_id", "actor_id", "action", "created_at"}
DETAIL_FIELDS = ITEM_FIELDS | {"reason", "before", "after"}
STATES = {"WAITING", "RUNNING", "NEEDS_REVIEW", "SUCCEEDED", "FAILED", "CANCELLED"}


# --- Helpers ----------------------------------------------------------------------------------


def ops(api: httpx.Client, task_id: str, token: str, params: Any = None) -> httpx.Response:
    return api.get(f"/v1/tasks/{task_id}/operations", params=params, headers=bearer(token))


def op(api: httpx.Client, task_id: str, audit_id: str, token: str) -> httpx.Response:
    return api.get(f"/v1/tasks/{task_id}/operations/{audit_id}", headers=bearer(token))


def walk(api: httpx.Client, task_id: str, token: str, limit: int) -> list[list[dict[str, Any]]]:
    """Every page of a task's operations, following next_cursor to the end."""
    pages: list[list[dict[str, Any]]] = []
    params: dict[str, Any] = {"limit": limit}
    while True:
        response = ops(api, task_id, token, params)
        assert response.status_code == 200, response.text
        data = response.json()["data"]
        pages.append(data["items"])
        if "next_cursor" not in data:
            return pages
        assert len(data["items"]) == limit  # only a full page has a successor
        params = {"limit": limit, "cursor": data["next_cursor"]}
        assert len(pages) < 1000


def newest_first(task_id: str) -> list[str]:
    rows = OperationAudit.objects.filter(task_id=task_id).values_list("created_at", "id")
    return [audit_id for _, audit_id in sorted(rows, reverse=True)]


def add_audit(task_id: str, created_at: datetime, action: str = "test.note") -> OperationAudit:
    """Append an audit record at a chosen time (through the journal, so the chain stays sound)."""
    return write_audit(
        task=Task.objects.get(id=task_id),
        operation_id=new_id(),
        actor_id=new_id(),
        action=action,
        reason="inserted by a test",
        evidence_ref=None,
        before={"state": "FAILED", "revision": "3"},
        after={"state": "FAILED", "revision": "3"},
        now=created_at,
    )


def add_timed_audits(task_id: str) -> None:
    """Records with ties on created_at (whole seconds and fractions), older than the seed's."""
    base = datetime(2021, 5, 1, 12, 0, 0, tzinfo=UTC)
    offsets = [0, 0, 0, 1, 1, 1.5, 2, 2, 2, 2, 2.000001, 3, 3, 86400, 86400]
    for offset in offsets:
        add_audit(task_id, base + timedelta(seconds=offset))


def token_of(world: dict[str, Any], name: str) -> str:
    return world["tokens"][name]


def credential_of(world: dict[str, Any], actor_name: str) -> Credential:
    return Credential.objects.get(namespace_id=world["namespace_id"], actor_name=actor_name)


def issue(world: dict[str, Any], permissions: list[str], queue_names: tuple[str, ...] = ()) -> str:
    namespace = Namespace.objects.get(id=world["namespace_id"])
    queues = [Queue.objects.get(namespace=namespace, name=name) for name in queue_names]
    _, token = credential_issue(
        namespace=namespace,
        actor_name=f"issued-{new_id()[:8]}",
        permissions=permissions,
        recovery_access=True,
        queues=queues,
    )
    return token


# --- AU1: a permission of its own, scope, no secrets ------------------------------------------


def test_reading_the_audit_needs_tasks_audit_read_not_tasks_read_AU1(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["failed"]
    audit_id = OperationAudit.objects.filter(task_id=task_id).values_list("id", flat=True)[0]
    reader = token_of(world, "reader")

    assert ops(api, task_id, reader).status_code == 403
    assert error_code(ops(api, task_id, reader)) == "PERMISSION_DENIED"
    assert op(api, task_id, audit_id, reader).status_code == 403

    auditor = token_of(world, "auditor")
    assert ops(api, task_id, auditor).status_code == 200
    assert op(api, task_id, audit_id, auditor).status_code == 200


def test_audit_permission_does_not_include_tasks_read_AU1_C3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    audit_only = issue(world, [Permission.AUDIT_READ])
    task_id = world["tasks"]["failed"]

    assert ops(api, task_id, audit_only).status_code == 200
    response = get_task(api, task_id, audit_only)
    assert response.status_code == 403
    assert error_code(response) == "PERMISSION_DENIED"


@pytest.mark.parametrize("outsider", ["other_queue", "other_namespace"])
def test_audit_outside_the_scope_is_not_found_AU1_C4(
    api: httpx.Client, world: dict[str, Any], outsider: str
) -> None:
    task_id = world["tasks"]["failed"]
    audit_id = OperationAudit.objects.filter(task_id=task_id).values_list("id", flat=True)[0]
    token = token_of(world, outsider)

    listed = ops(api, task_id, token)
    missing = ops(api, new_id(), token)
    assert listed.status_code == missing.status_code == 404
    assert listed.json()["error"] == missing.json()["error"]  # indistinguishable
    detail = op(api, task_id, audit_id, token)
    assert detail.status_code == 404
    assert error_code(detail) == "NOT_FOUND"


def test_audit_scope_is_checked_again_on_every_page_AU1(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = issue(world, [Permission.AUDIT_READ], queue_names=("objects",))
    task_id = world["tasks"]["needs_review"]
    first = ops(api, task_id, token, {"limit": 1})
    assert first.status_code == 200
    cursor = first.json()["data"]["next_cursor"]

    credential = Credential.objects.get(token_hash=hashlib.sha256(token.encode()).hexdigest())
    credential.queues.set([Queue.objects.get(namespace_id=world["namespace_id"], name="reports")])

    second = ops(api, task_id, token, {"limit": 1, "cursor": cursor})
    assert second.status_code == 404
    assert error_code(second) == "NOT_FOUND"


def test_audit_never_shows_another_tasks_records_AU1(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    retry(api, world)  # the successor's acceptance shares the operation id of the retry
    for task_id in Task.objects.filter(namespace_id=world["namespace_id"]).values_list(
        "id", flat=True
    ):
        items = [i for page in walk(api, task_id, token_of(world, "admin"), 100) for i in page]
        assert items
        assert {item["task_id"] for item in items} == {task_id}


def test_audit_holds_no_secrets_AU1(api: httpx.Client, world: dict[str, Any]) -> None:
    review(api, world)
    retry(api, world)
    tasks = list(Task.objects.filter(namespace_id=world["namespace_id"]))
    leased = Task.objects.get(id=world["tasks"]["needs_review_leased"])
    assert leased.lease_id and leased.permit_id
    secrets = {leased.lease_id, leased.permit_id, *world["tokens"].values()}
    secrets |= set(
        Credential.objects.filter(namespace_id=world["namespace_id"]).values_list(
            "token_hash", flat=True
        )
    )
    admin = token_of(world, "admin")
    texts: list[str] = []
    for task in tasks:
        listed = ops(api, task.id, admin, {"limit": 100})
        texts.append(listed.text)
        for item in listed.json()["data"]["items"]:
            texts.append(op(api, task.id, item["id"], admin).text)
    assert len(texts) > len(tasks)
    for text in texts:
        for secret in secrets:
            assert secret not in text
        for word in ("lease_id", "permit_id", "token"):
            assert word not in text


# --- AU2: query parameters --------------------------------------------------------------------


def test_operations_limit_defaults_to_20_AU2(api: httpx.Client, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["failed"]
    for second in range(25):
        add_audit(task_id, datetime(2022, 1, 1, 0, 0, second, tzinfo=UTC))

    data = ops(api, task_id, token_of(world, "auditor")).json()["data"]

    assert len(data["items"]) == 20
    assert "next_cursor" in data


@pytest.mark.parametrize("limit", ["1", "2", "100"])
def test_operations_limit_accepts_1_to_100_AU2(
    api: httpx.Client, world: dict[str, Any], limit: str
) -> None:
    task_id = world["tasks"]["failed"]
    for second in range(3):
        add_audit(task_id, datetime(2022, 1, 1, 0, 0, second, tzinfo=UTC))

    response = ops(api, task_id, token_of(world, "auditor"), {"limit": limit})

    assert response.status_code == 200
    assert len(response.json()["data"]["items"]) == min(int(limit), 5)


@pytest.mark.parametrize(
    "query",
    [
        "limit=0",
        "limit=101",
        "limit=abc",
        "limit=",
        "limit=-1",
        "limit=%2B1",
        "limit=1.0",
        "limit=%201",
        "limit=%D9%A1",  # ARABIC-INDIC DIGIT ONE: a digit, but not an ASCII one
        "limit=99999999999999999999999",
        "limit=2&limit=2",
        "limit=2&limit=3",
        "cursor=",
        "cursor=a&cursor=a",
        "Limit=2",
        "offset=20",
        "page=2",
        "limit=2&sort=asc",
    ],
)
def test_operations_query_is_strict_AU2(
    api: httpx.Client, untouched_world: dict[str, Any], query: str
) -> None:
    world = untouched_world
    task_id = world["tasks"]["failed"]
    response = api.get(
        f"/v1/tasks/{task_id}/operations?{query}", headers=bearer(token_of(world, "auditor"))
    )
    assert response.status_code == 400
    assert error_code(response) == "INVALID_ARGUMENT"


def test_operations_cursor_over_1024_characters_is_refused_AU2(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["failed"]
    token = token_of(world, "auditor")

    too_long = ops(api, task_id, token, {"cursor": "a" * 1025})
    assert too_long.status_code == 400
    assert too_long.json()["error"]["field"] == "cursor"
    assert "1024" in too_long.json()["error"]["message"]
    # 1024 characters pass the length rule and fail only as a cursor this server did not issue.
    at_limit = ops(api, task_id, token, {"cursor": "a" * 1024})
    assert at_limit.status_code == 400
    assert "1024" not in at_limit.json()["error"]["message"]


def test_operations_checks_permission_before_query_and_query_before_scope_O3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["failed"]
    assert ops(api, task_id, token_of(world, "reader"), {"limit": "abc"}).status_code == 403
    assert ops(api, new_id(), token_of(world, "auditor"), {"limit": "abc"}).status_code == 400
    assert ops(api, "ABC", token_of(world, "auditor")).status_code == 400


# --- AU3: order and cursors -------------------------------------------------------------------


@pytest.mark.parametrize("limit", [1, 2, 3, 100])
def test_operations_pages_are_newest_first_complete_and_disjoint_AU3(
    api: httpx.Client, world: dict[str, Any], limit: int
) -> None:
    task_id = world["tasks"]["failed"]
    add_timed_audits(task_id)
    expected = newest_first(task_id)

    pages = walk(api, task_id, token_of(world, "auditor"), limit)

    ids = [item["id"] for page in pages for item in page]
    assert ids == expected
    assert len(set(ids)) == len(ids) == 17  # accepted, execution result and 15 inserted
    assert all(len(page) == limit for page in pages[:-1])
    assert 1 <= len(pages[-1]) <= limit


def test_operations_created_at_ties_are_ordered_by_id_AU3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["failed"]
    tie = datetime(2021, 1, 1, tzinfo=UTC)
    inserted = [add_audit(task_id, tie).id for _ in range(6)]

    items = [i for page in walk(api, task_id, token_of(world, "auditor"), 2) for i in page]

    tail = [item["id"] for item in items if item["id"] in inserted]
    assert tail == sorted(inserted, reverse=True)
    assert {item["created_at"] for item in items if item["id"] in inserted} == {
        "2021-01-01T00:00:00Z"
    }


def test_operations_pages_are_not_a_snapshot_AU3(api: httpx.Client, world: dict[str, Any]) -> None:
    """A record written between pages shows on a new first page, not inside the walk."""
    task_id = world["tasks"]["needs_review"]
    token = token_of(world, "admin")
    first = ops(api, task_id, token, {"limit": 1}).json()["data"]

    receipt = review(api, world).json()["data"]

    rest = ops(api, task_id, token, {"limit": 100, "cursor": first["next_cursor"]})
    assert receipt["audit_id"] not in rest.text
    assert (
        ops(api, task_id, token, {"limit": 1}).json()["data"]["items"][0]["id"]
        == (receipt["audit_id"])
    )


def test_operations_cursor_of_another_task_is_refused_AU3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = token_of(world, "auditor")
    cursor = ops(api, world["tasks"]["failed"], token, {"limit": 1}).json()["data"]["next_cursor"]

    response = ops(api, world["tasks"]["cancelled"], token, {"limit": 1, "cursor": cursor})

    assert response.status_code == 400
    assert error_code(response) == "INVALID_ARGUMENT"
    assert response.json()["error"]["field"] == "cursor"


def test_operations_cursor_of_another_namespace_is_refused_AU3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    elsewhere = seed_world(label="elsewhere")
    foreign = ops(
        api, elsewhere["tasks"]["failed"], elsewhere["tokens"]["auditor"], {"limit": 1}
    ).json()["data"]["next_cursor"]

    response = ops(
        api, world["tasks"]["failed"], token_of(world, "auditor"), {"limit": 1, "cursor": foreign}
    )

    assert response.status_code == 400
    assert error_code(response) == "INVALID_ARGUMENT"


def test_operations_tampered_cursor_is_refused_AU3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["failed"]
    token = token_of(world, "auditor")
    cursor = ops(api, task_id, token, {"limit": 1}).json()["data"]["next_cursor"]
    middle = len(cursor) // 3
    tampered = cursor[:middle] + ("A" if cursor[middle] != "A" else "B") + cursor[middle + 1 :]

    for bad in (tampered, cursor[:-1], cursor + "x", "not-a-cursor", cursor.split(":")[0]):
        response = ops(api, task_id, token, {"limit": 1, "cursor": bad})
        assert response.status_code == 400, bad
        assert error_code(response) == "INVALID_ARGUMENT"


def test_tasks_list_cursor_is_refused_by_operations_AU3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = token_of(world, "admin")
    listed = api.get("/v1/tasks", params={"limit": 1}, headers=bearer(token))
    cursor = listed.json()["data"]["next_cursor"]

    response = ops(api, world["tasks"]["failed"], token, {"cursor": cursor})

    assert response.status_code == 400
    assert error_code(response) == "INVALID_ARGUMENT"


# --- AU4, AU5: shapes -------------------------------------------------------------------------


def test_operation_items_have_exactly_the_listed_fields_AU4(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    review(api, world)
    response = ops(api, world["tasks"]["needs_review"], token_of(world, "auditor"))

    body = response.json()
    assert set(body) == {"request_id", "data"}
    assert set(body["data"]) == {"items"}  # the whole audit fits: no next_cursor
    actions = [item["action"] for item in body["data"]["items"]]
    assert actions == ["task.review", "task.execution_result", "task.accepted"]
    for item in body["data"]["items"]:
        assert set(item) == ITEM_FIELDS
        assert item["created_at"].endswith("Z")


def test_next_cursor_only_when_more_pages_exist_AU4(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["cancelled"]  # accepted + cancelled: two records
    token = token_of(world, "auditor")

    exact = ops(api, task_id, token, {"limit": 2}).json()["data"]
    assert len(exact["items"]) == 2
    assert "next_cursor" not in exact

    first = ops(api, task_id, token, {"limit": 1}).json()["data"]
    assert isinstance(first["next_cursor"], str)
    last = ops(api, task_id, token, {"limit": 1, "cursor": first["next_cursor"]}).json()["data"]
    assert len(last["items"]) == 1
    assert "next_cursor" not in last


def test_operation_detail_adds_reason_evidence_before_after_AU5_RV7(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    body = review_body()
    receipt = review(api, world).json()["data"]
    token = token_of(world, "auditor")

    detail = op(api, task_id, receipt["audit_id"], token).json()["data"]

    assert set(detail) == DETAIL_FIELDS | {"evidence_ref"}
    listed = ops(api, task_id, token).json()["data"]["items"][0]
    assert {name: detail[name] for name in ITEM_FIELDS} == listed
    assert detail["action"] == "task.review"
    assert detail["reason"] == body["reason"]
    assert detail["evidence_ref"] == body["evidence_ref"]
    assert detail["before"] == {"state": "NEEDS_REVIEW", "revision": "3"}
    result_text = json.dumps(body["result"])
    assert detail["after"] == {
        "state": "FAILED",
        "revision": "4",
        "effect_uncertain": False,
        "execution_settled": True,
        "result_digest": "sha256:" + hashlib.sha256(result_text.encode()).hexdigest(),
    }


def test_operation_detail_without_evidence_omits_it_AU5(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["failed"]
    accepted = OperationAudit.objects.get(task_id=task_id, action="task.accepted")

    detail = op(api, task_id, accepted.id, token_of(world, "auditor")).json()["data"]

    assert set(detail) == DETAIL_FIELDS
    assert detail["before"] is None


def test_operation_of_another_task_is_not_found_AU5(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = token_of(world, "auditor")
    other = OperationAudit.objects.filter(task_id=world["tasks"]["cancelled"]).first()
    elsewhere = seed_world(label="elsewhere")
    foreign = OperationAudit.objects.filter(task_id=elsewhere["tasks"]["failed"]).first()
    assert other is not None and foreign is not None

    for audit_id in (other.id, foreign.id, new_id()):
        response = op(api, world["tasks"]["failed"], audit_id, token)
        assert response.status_code == 404
        assert error_code(response) == "NOT_FOUND"


@pytest.mark.parametrize(
    "audit_id", ["abc", "0" * 31, "0" * 33, "A" * 32, "g" * 32, "%20" + "0" * 31]
)
def test_malformed_audit_id_is_invalid_AU5_C5(
    api: httpx.Client, untouched_world: dict[str, Any], audit_id: str
) -> None:
    world = untouched_world
    response = api.get(
        f"/v1/tasks/{world['tasks']['failed']}/operations/{audit_id}",
        headers=bearer(token_of(world, "auditor")),
    )
    assert response.status_code == 400
    assert error_code(response) == "INVALID_ARGUMENT"


def test_operation_detail_refuses_query_parameters_AU2(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["failed"]
    audit_id = OperationAudit.objects.filter(task_id=task_id).values_list("id", flat=True)[0]
    response = api.get(
        f"/v1/tasks/{task_id}/operations/{audit_id}",
        params={"limit": 1},
        headers=bearer(token_of(world, "auditor")),
    )
    assert response.status_code == 400


# --- AU6: actors, and reading grants nothing --------------------------------------------------


def test_actor_id_comes_from_the_credential_AU6(api: httpx.Client, world: dict[str, Any]) -> None:
    reviewed = review(api, world, token=token_of(world, "reviewer")).json()["data"]
    retried = retry(api, world, token=token_of(world, "retrier")).json()["data"]
    token = token_of(world, "admin")

    review_audit = op(api, world["tasks"]["needs_review"], reviewed["audit_id"], token)
    retry_audit = op(api, world["tasks"]["failed"], retried["audit_id"], token)

    namespace_id = world["namespace_id"]
    assert review_audit.json()["data"]["actor_id"] == actor_id_for(namespace_id, "reviewer")
    assert retry_audit.json()["data"]["actor_id"] == actor_id_for(namespace_id, "retrier")
    assert credential_of(world, "retrier").actor_id == actor_id_for(namespace_id, "retrier")


def test_actor_id_in_the_body_is_refused_AU6(api: httpx.Client, world: dict[str, Any]) -> None:
    response = review(api, world, actor_id=actor_id_for(world["namespace_id"], "admin"))
    assert response.status_code == 400
    assert not OperationAudit.objects.filter(
        task_id=world["tasks"]["needs_review"], action="task.review"
    ).exists()


def test_reading_the_audit_grants_no_execution_rights_AU6(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    auditor = token_of(world, "auditor")
    tasks = Task.objects.filter(namespace_id=world["namespace_id"])
    before = {t.id: (t.state, t.revision) for t in tasks}
    audits = OperationAudit.objects.filter(namespace_id=world["namespace_id"]).count()

    reviewed = review(api, world, token=auditor)
    retried = retry(api, world, token=auditor)

    for response in (reviewed, retried):
        assert response.status_code == 403
        assert error_code(response) == "PERMISSION_DENIED"
    assert {t.id: (t.state, t.revision) for t in tasks.all()} == before
    assert OperationAudit.objects.filter(namespace_id=world["namespace_id"]).count() == audits


# --- O2: every task's history starts with its acceptance --------------------------------------


def test_every_task_starts_with_accepted_and_before_holds_state_and_revision_O2(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    admin = token_of(world, "admin")
    review(api, world)
    child_id = retry(api, world).json()["data"]["task"]["id"]
    task_ids = list(
        Task.objects.filter(namespace_id=world["namespace_id"]).values_list("id", flat=True)
    )
    assert child_id in task_ids and len(task_ids) == 12

    for task_id in task_ids:
        items = ops(api, task_id, admin, {"limit": 100}).json()["data"]["items"]
        details = [op(api, task_id, item["id"], admin).json()["data"] for item in items]
        oldest_first = details[::-1]
        accepted = oldest_first[0]
        assert accepted["action"] == "task.accepted"
        assert accepted["before"] is None
        assert accepted["after"]["state"] == "WAITING"
        assert accepted["after"]["revision"] == "1"
        assert [d["action"] for d in oldest_first].count("task.accepted") == 1
        revision = 1
        for later in oldest_first[1:]:
            assert isinstance(later["before"], dict), later
            assert later["before"]["state"] in STATES
            # Unaudited steps (a worker starting an attempt) may have moved the revision on.
            assert int(later["before"]["revision"]) >= revision
            revision = int(later["after"].get("revision", later["before"]["revision"]))


def test_successor_acceptance_names_its_source_and_the_retry_audit_O2_RT9(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    source_id = world["tasks"]["failed"]
    data = retry(api, world).json()["data"]
    child_id = data["task"]["id"]
    admin = token_of(world, "admin")

    (item,) = ops(api, child_id, admin).json()["data"]["items"]
    accepted = op(api, child_id, item["id"], admin).json()["data"]
    retry_audit = op(api, source_id, data["audit_id"], admin).json()["data"]

    assert accepted["action"] == "task.accepted"
    assert accepted["before"] is None
    assert accepted["after"] == {
        "state": "WAITING",
        "revision": "1",
        "retry_of": source_id,
        "audit_id": data["audit_id"],
    }
    assert accepted["operation_id"] == retry_audit["operation_id"]
    assert retry_audit["action"] == "task.retry"
    assert retry_audit["before"] == {"state": "FAILED", "revision": "3"}
    assert retry_audit["after"] == {
        "source_task_id": source_id,
        "retry_task_id": child_id,
        "safe_to_retry": True,
        "task_timeout_ms": 60000,
    }
