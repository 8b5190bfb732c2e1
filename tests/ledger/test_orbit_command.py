"""``manage.py orbit`` run as a real subprocess against the test database: ``orbit seed`` (the
shape is a contract with the console demo, the tests and acceptance checks) and
``orbit credential`` (C3: recovery permissions only with ``--recovery-access``)."""

import hashlib
import json
import re
import secrets
import subprocess
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orbit_console.ledger.models import Credential, Permission, Queue, Task
from orbit_console.lib.ids import is_id
from orbit_console.lib.strictjson import loads
from tests.support import servers
from tests.support.orbit import (
    CANCELLED_REVISION,
    RETRY_REVISION,
    REVIEW_REVISION,
    bearer,
    error_code,
    get_task,
    post,
    retry_body,
    review_body,
)

TASK_NAMES = {
    "needs_review",
    "needs_review_2",
    "needs_review_leased",
    "needs_review_workflow",
    "failed",
    "failed_uncertain",
    "cancelled",
    "succeeded",
    "queue_full_failed",
}
TOKEN_NAMES = {
    "admin",
    "reviewer",
    "retrier",
    "auditor",
    "reader",
    "subscriber",
    "other_queue",
    "other_namespace",
}
PAYLOAD = '{"object_ref":"objects/input","sequence":9007199254740993}'
TOKEN_LINE = re.compile(r"orb_[A-Za-z0-9_-]{20,}\n")


def run_orbit(*args: str) -> subprocess.CompletedProcess[str]:
    """``python manage.py orbit ...`` in a child process, on the database of this test run."""
    return servers.run_manage("orbit", *args, timeout=120)


def run_seed() -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    result = run_orbit("seed")
    assert result.returncode == 0, result.stderr
    return result, json.loads(result.stdout)


def issue(*args: str) -> subprocess.CompletedProcess[str]:
    return run_orbit("credential", *args)


def issued_token(*args: str) -> str:
    result = issue(*args)
    assert result.returncode == 0, result.stderr
    assert TOKEN_LINE.fullmatch(result.stdout), result.stdout
    return result.stdout.strip()


def actor() -> str:
    return "actor-" + secrets.token_hex(6)


def credentials_of(actor_name: str) -> list[Credential]:
    return list(Credential.objects.filter(actor_name=actor_name))


@pytest.fixture(scope="module")
def seeded(django_db_setup: None, django_db_blocker: Any) -> Iterator[dict[str, Any]]:
    """One ``orbit seed`` run shared by the tests of this module that only read what it made
    (reads, and requests refused before they change anything). Tests that send writes which
    could succeed run their own seed."""
    with django_db_blocker.unblock():
        result, data = run_seed()
    yield {"stdout": result.stdout, "stderr": result.stderr, "data": data}


# --- orbit seed: the output contract -----------------------------------------------------------


def test_seed_prints_exactly_one_json_object_on_stdout(
    live_db: None, seeded: dict[str, Any]
) -> None:
    stdout: str = seeded["stdout"]
    assert stdout.endswith("\n") and stdout.count("\n") == 1
    value, end = json.JSONDecoder().raw_decode(stdout)
    assert isinstance(value, dict)
    assert stdout[end:] == "\n"
    assert loads(stdout) == value  # strict: no duplicate keys, nothing after the object


def test_seed_output_has_exactly_the_promised_keys(live_db: None, seeded: dict[str, Any]) -> None:
    data = seeded["data"]
    assert set(data) == {"namespace_id", "queue_id", "tokens", "tasks"}
    assert set(data["tokens"]) == TOKEN_NAMES
    assert set(data["tasks"]) == TASK_NAMES
    assert is_id(data["namespace_id"]) and is_id(data["queue_id"])
    assert all(is_id(task_id) for task_id in data["tasks"].values())
    assert len(set(data["tasks"].values())) == len(TASK_NAMES)
    tokens = data["tokens"].values()
    assert all(TOKEN_LINE.fullmatch(token + "\n") for token in tokens)
    assert len(set(tokens)) == len(TOKEN_NAMES)


def test_seed_output_matches_the_database(live_db: None, seeded: dict[str, Any]) -> None:
    data = seeded["data"]
    queue = Queue.objects.get(id=data["queue_id"])
    assert queue.namespace_id == data["namespace_id"]
    tasks = Task.objects.filter(id__in=data["tasks"].values())
    assert {task.namespace_id for task in tasks} == {data["namespace_id"]}
    assert len(tasks) == len(TASK_NAMES)
    for name, token in data["tokens"].items():
        credential = Credential.objects.get(token_hash=hashlib.sha256(token.encode()).hexdigest())
        assert credential.actor_name == name
        assert credential.revoked_at is None and credential.expires_at is None


def test_seed_tokens_are_not_stored_in_clear(live_db: None, seeded: dict[str, Any]) -> None:
    for token in seeded["data"]["tokens"].values():
        assert not Credential.objects.filter(token_hash=token).exists()


def test_seed_twice_gives_different_ids_and_tokens(live_db: None, seeded: dict[str, Any]) -> None:
    first = seeded["data"]
    _, second = run_seed()

    def identities(data: dict[str, Any]) -> set[str]:
        return {
            data["namespace_id"],
            data["queue_id"],
            *data["tasks"].values(),
            *data["tokens"].values(),
        }

    assert identities(first).isdisjoint(identities(second))
    assert set(second["tasks"]) == TASK_NAMES and set(second["tokens"]) == TOKEN_NAMES


# --- orbit seed: every token holds what its name says (C3, C4) ---------------------------------


def access(api: httpx.Client, token: str, task_id: str) -> dict[str, int]:
    """The status of each kind of call; writes send ``{}``, which a caller allowed to write gets
    refused as 400 (O3: 403 comes before body checks), so nothing changes either way."""
    return {
        "read": get_task(api, task_id, token).status_code,
        "review": post(api, task_id, "review", token, b"{}").status_code,
        "retry": post(api, task_id, "retry", token, b"{}").status_code,
        "audit": api.get(f"/v1/tasks/{task_id}/operations", headers=bearer(token)).status_code,
    }


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        ("admin", {"read": 200, "review": 400, "retry": 400, "audit": 200}),
        ("reviewer", {"read": 200, "review": 400, "retry": 403, "audit": 403}),
        ("retrier", {"read": 200, "review": 403, "retry": 400, "audit": 403}),
        ("auditor", {"read": 200, "review": 403, "retry": 403, "audit": 200}),
        ("reader", {"read": 200, "review": 403, "retry": 403, "audit": 403}),
    ],
)
def test_seed_token_permissions_C3(
    api: httpx.Client, seeded: dict[str, Any], token: str, expected: dict[str, int]
) -> None:
    data = seeded["data"]
    for task in ("needs_review", "failed"):
        assert access(api, data["tokens"][token], data["tasks"][task]) == expected


@pytest.mark.parametrize(
    ("token", "permissions"),
    [
        (
            "admin",
            {"tasks:read", "tasks:review", "tasks:retry", "tasks:audit:read", "events:subscribe"},
        ),
        ("reviewer", {"tasks:read", "tasks:review"}),
        ("retrier", {"tasks:read", "tasks:retry"}),
        ("auditor", {"tasks:read", "tasks:audit:read"}),
        ("reader", {"tasks:read"}),
        ("subscriber", {"tasks:read", "tasks:audit:read", "events:subscribe"}),
        ("other_queue", {"tasks:read", "tasks:review", "tasks:retry", "tasks:audit:read"}),
        ("other_namespace", {"tasks:read", "tasks:review", "tasks:retry", "tasks:audit:read"}),
    ],
)
def test_seed_token_permissions_stored_C3(
    live_db: None, seeded: dict[str, Any], token: str, permissions: set[str]
) -> None:
    value = seeded["data"]["tokens"][token]
    credential = Credential.objects.get(token_hash=hashlib.sha256(value.encode()).hexdigest())
    assert credential.permission_set == permissions
    scoped = {queue.id for queue in credential.queues.all()}
    if token == "other_queue":
        assert len(scoped) == 1 and seeded["data"]["queue_id"] not in scoped
    else:
        assert scoped == set()
    same_namespace = credential.namespace_id == seeded["data"]["namespace_id"]
    assert same_namespace is (token != "other_namespace")


def test_reviewer_reads_but_may_not_retry_nor_read_audit_C3(
    api: httpx.Client, seeded: dict[str, Any]
) -> None:
    data = seeded["data"]
    token = data["tokens"]["reviewer"]
    assert get_task(api, data["tasks"]["failed"], token).status_code == 200
    refused = post(api, data["tasks"]["failed"], "retry", token, retry_body())
    assert refused.status_code == 403 and error_code(refused) == "PERMISSION_DENIED"
    audit = api.get(f"/v1/tasks/{data['tasks']['needs_review']}/operations", headers=bearer(token))
    assert audit.status_code == 403 and error_code(audit) == "PERMISSION_DENIED"
    one = api.get(
        f"/v1/tasks/{data['tasks']['needs_review']}/operations/{'0' * 32}", headers=bearer(token)
    )
    assert one.status_code == 403


@pytest.mark.parametrize("token", ["other_queue", "other_namespace"])
def test_out_of_scope_tokens_see_not_found_on_every_seeded_task_C4(
    api: httpx.Client, seeded: dict[str, Any], token: str
) -> None:
    data = seeded["data"]
    value = data["tokens"][token]
    for task_id in data["tasks"].values():
        response = get_task(api, task_id, value)
        assert response.status_code == 404 and error_code(response) == "NOT_FOUND"
        operations = api.get(f"/v1/tasks/{task_id}/operations", headers=bearer(value))
        assert operations.status_code == 404
        attempts = api.get(f"/v1/tasks/{task_id}/attempts", headers=bearer(value))
        assert attempts.status_code == 404
    listed = api.get("/v1/tasks", headers=bearer(value))
    assert listed.status_code == 200  # the token itself is valid
    assert not {item["id"] for item in listed.json()["data"]["items"]} & set(data["tasks"].values())


@pytest.mark.parametrize("token", ["other_queue", "other_namespace"])
def test_out_of_scope_tokens_get_not_found_on_writes_C4(
    api: httpx.Client, live_db: None, token: str
) -> None:
    _, data = run_seed()
    value = data["tokens"][token]
    before = {
        t.id: (t.state, t.revision) for t in Task.objects.filter(id__in=data["tasks"].values())
    }
    review = post(api, data["tasks"]["needs_review"], "review", value, review_body())
    assert review.status_code == 404 and error_code(review) == "NOT_FOUND"
    retry = post(api, data["tasks"]["failed"], "retry", value, retry_body())
    assert retry.status_code == 404 and error_code(retry) == "NOT_FOUND"
    after = {
        t.id: (t.state, t.revision) for t in Task.objects.filter(id__in=data["tasks"].values())
    }
    assert after == before
    assert not Task.objects.filter(retry_of=data["tasks"]["failed"]).exists()


# --- orbit seed: every task is in the promised situation ---------------------------------------


def detail(api: httpx.Client, seeded: dict[str, Any], name: str) -> tuple[dict[str, Any], str]:
    data = seeded["data"]
    response = get_task(api, data["tasks"][name], data["tokens"]["admin"])
    assert response.status_code == 200
    return response.json()["data"], response.text


@pytest.mark.parametrize("name", ["needs_review", "needs_review_2"])
def test_seeded_needs_review_task_is_reviewable_RV1(
    api: httpx.Client, live_db: None, seeded: dict[str, Any], name: str
) -> None:
    data = seeded["data"]
    admin = data["tokens"]["admin"]
    task_id = data["tasks"][name]
    task, text = detail(api, seeded, name)
    assert task["state"] == "NEEDS_REVIEW"
    assert task["revision"] == REVIEW_REVISION
    assert task["effect_uncertain"] is True
    assert task["queue_id"] == data["queue_id"] and task["namespace_id"] == data["namespace_id"]
    assert task["owner"] == {"kind": "NONE"}
    assert task["leased"] is False and task["active_attempt"] is False
    assert task["unreleased_permit"] is False and task["gated"] is False
    assert task["retry"]["attempt_timeout_ms"] == 10000
    assert '"payload":' + PAYLOAD in text  # the stored text, exactly (I8)
    assert Task.objects.get(id=task_id).payload == PAYLOAD

    attempts = api.get(f"/v1/tasks/{task_id}/attempts", headers=bearer(admin))
    assert attempts.status_code == 200
    items = attempts.json()["data"]["items"]
    assert len(items) == 1
    assert items[0]["outcome"] == "UNKNOWN" and "ended_at" in items[0]
    assert task["attempt_count"] == 1

    operations = api.get(f"/v1/tasks/{task_id}/operations", headers=bearer(admin))
    assert operations.status_code == 200
    actions = {item["action"] for item in operations.json()["data"]["items"]}
    assert {"task.accepted", "task.execution_result"} <= actions


def test_seeded_needs_review_task_has_a_late_report_RV6(
    api: httpx.Client, seeded: dict[str, Any]
) -> None:
    data = seeded["data"]
    task_id = data["tasks"]["needs_review"]
    attempts = api.get(f"/v1/tasks/{task_id}/attempts", headers=bearer(data["tokens"]["admin"]))
    (attempt,) = attempts.json()["data"]["items"]
    assert attempt["outcome"] == "UNKNOWN"  # the late report does not rewrite the attempt
    assert [report["outcome"] for report in attempt["late_reports"]] == ["FAILED"]


def test_seeded_leased_task_has_lease_and_active_attempt_RV1(
    api: httpx.Client, seeded: dict[str, Any]
) -> None:
    task, _ = detail(api, seeded, "needs_review_leased")
    assert task["state"] == "NEEDS_REVIEW"
    assert task["leased"] is True and task["active_attempt"] is True
    assert "lease_expires_at" in task


def test_seeded_workflow_task_is_owned_by_a_workflow_RV2(
    api: httpx.Client, seeded: dict[str, Any]
) -> None:
    task, _ = detail(api, seeded, "needs_review_workflow")
    assert task["state"] == "NEEDS_REVIEW"
    assert task["owner"]["kind"] == "WORKFLOW" and is_id(task["owner"]["workflow_id"])
    assert task["leased"] is False and task["active_attempt"] is False


@pytest.mark.parametrize(
    ("name", "state", "revision", "uncertain"),
    [
        ("failed", "FAILED", RETRY_REVISION, False),
        ("failed_uncertain", "FAILED", RETRY_REVISION, True),
        ("cancelled", "CANCELLED", CANCELLED_REVISION, False),
        ("succeeded", "SUCCEEDED", RETRY_REVISION, False),
        ("queue_full_failed", "FAILED", RETRY_REVISION, False),
    ],
)
def test_seeded_terminal_tasks_RT1(
    api: httpx.Client,
    seeded: dict[str, Any],
    name: str,
    state: str,
    revision: str,
    uncertain: bool,
) -> None:
    task, text = detail(api, seeded, name)
    assert task["state"] == state
    assert task["revision"] == revision
    assert task["effect_uncertain"] is uncertain
    assert task["owner"] == {"kind": "NONE"}
    assert task["leased"] is False and task["active_attempt"] is False
    assert task["unreleased_permit"] is False
    assert "completed_at" in task and "retry_of" not in task
    assert '"payload":' + PAYLOAD in text


def test_seeded_queue_full_task_retry_is_refused_with_queue_full_RT7(
    api: httpx.Client, live_db: None
) -> None:
    _, data = run_seed()
    task_id = data["tasks"]["queue_full_failed"]
    assert (
        get_task(api, task_id, data["tokens"]["admin"]).json()["data"]["queue_id"]
        != (data["queue_id"])
    )
    response = post(api, task_id, "retry", data["tokens"]["admin"], retry_body())
    assert response.status_code == 429
    assert error_code(response) == "QUEUE_FULL"
    assert response.json()["error"]["retry_after_ms"] > 0
    assert not Task.objects.filter(retry_of=task_id).exists()
    task = Task.objects.get(id=task_id)
    assert (task.state, str(task.revision)) == ("FAILED", RETRY_REVISION)


def test_seeded_failed_task_in_open_queue_can_be_retried_RT1(
    api: httpx.Client, live_db: None
) -> None:
    _, data = run_seed()
    response = post(api, data["tasks"]["failed"], "retry", data["tokens"]["retrier"], retry_body())
    assert response.status_code == 201, response.text
    assert response.json()["data"]["task"]["retry_of"] == data["tasks"]["failed"]


def test_seeded_needs_review_task_can_be_reviewed_by_reviewer_RV1(
    api: httpx.Client, live_db: None
) -> None:
    _, data = run_seed()
    token = data["tokens"]["reviewer"]
    response = post(api, data["tasks"]["needs_review_2"], "review", token, review_body())
    assert response.status_code == 200, response.text
    assert response.json()["data"]["task"]["state"] == "FAILED"


# --- orbit credential ---------------------------------------------------------------------------


def test_credential_prints_exactly_one_token_line_that_works_C1(
    api: httpx.Client, live_db: None, seeded: dict[str, Any]
) -> None:
    data = seeded["data"]
    name = actor()
    result = issue(
        "--actor", name, "--namespace", data["namespace_id"], "--permission", "tasks:read"
    )
    assert result.returncode == 0, result.stderr
    assert TOKEN_LINE.fullmatch(result.stdout)
    token = result.stdout.strip()
    assert token not in result.stderr  # the token is printed once, on stdout only

    assert access(api, token, data["tasks"]["needs_review"]) == {
        "read": 200,
        "review": 403,
        "retry": 403,
        "audit": 403,
    }
    (credential,) = credentials_of(name)
    assert credential.permission_set == {"tasks:read"}
    assert credential.namespace_id == data["namespace_id"]
    assert credential.token_hash == hashlib.sha256(token.encode()).hexdigest()


@pytest.mark.parametrize("permission", ["tasks:review", "tasks:retry", "tasks:audit:read"])
def test_credential_recovery_permission_needs_recovery_access_flag_C3(
    live_db: None, seeded: dict[str, Any], permission: str
) -> None:
    name = actor()
    result = issue(
        "--actor",
        name,
        "--namespace",
        seeded["data"]["namespace_id"],
        "--permission",
        "tasks:read",
        "--permission",
        permission,
    )
    assert result.returncode != 0
    assert result.stdout == ""
    assert "recovery access" in result.stderr
    assert credentials_of(name) == []


def test_credential_recovery_access_alone_grants_review_retry_and_audit_C3(
    api: httpx.Client, live_db: None, seeded: dict[str, Any]
) -> None:
    data = seeded["data"]
    name = actor()
    token = issued_token("--actor", name, "--namespace", data["namespace_id"], "--recovery-access")
    status = access(api, token, data["tasks"]["needs_review"])
    assert {kind: status[kind] for kind in ("review", "retry", "audit")} == {
        "review": 400,
        "retry": 400,
        "audit": 200,
    }
    (credential,) = credentials_of(name)
    assert {Permission.REVIEW, Permission.RETRY, Permission.AUDIT_READ} <= credential.permission_set


def test_credential_recovery_access_with_one_permission_grants_only_that_one_C3(
    api: httpx.Client, live_db: None, seeded: dict[str, Any]
) -> None:
    data = seeded["data"]
    token = issued_token(
        "--actor",
        actor(),
        "--namespace",
        data["namespace_id"],
        "--permission",
        "tasks:read",
        "--permission",
        "tasks:review",
        "--recovery-access",
    )
    assert access(api, token, data["tasks"]["needs_review"]) == {
        "read": 200,
        "review": 400,
        "retry": 403,
        "audit": 403,
    }


def test_credential_queue_option_limits_scope_C4(
    api: httpx.Client, live_db: None, seeded: dict[str, Any]
) -> None:
    data = seeded["data"]
    name = actor()
    token = issued_token(
        "--actor",
        name,
        "--namespace",
        data["namespace_id"],
        "--queue",
        data["queue_id"],
        "--permission",
        "tasks:read",
    )
    inside = get_task(api, data["tasks"]["needs_review"], token)
    assert inside.status_code == 200
    assert inside.json()["data"]["queue_id"] == data["queue_id"]
    outside = get_task(api, data["tasks"]["queue_full_failed"], token)  # the "exports" queue
    assert outside.status_code == 404 and error_code(outside) == "NOT_FOUND"
    (credential,) = credentials_of(name)
    assert {queue.id for queue in credential.queues.all()} == {data["queue_id"]}


def test_credential_without_queue_option_covers_the_whole_namespace_C4(
    api: httpx.Client, live_db: None, seeded: dict[str, Any]
) -> None:
    data = seeded["data"]
    token = issued_token(
        "--actor", actor(), "--namespace", data["namespace_id"], "--permission", "tasks:read"
    )
    for task_id in data["tasks"].values():
        assert get_task(api, task_id, token).status_code == 200


def test_credential_for_unknown_namespace_fails(live_db: None) -> None:
    name = actor()
    result = issue("--actor", name, "--namespace", "0" * 32, "--permission", "tasks:read")
    assert result.returncode != 0
    assert result.stdout == ""
    assert "namespace" in result.stderr
    assert credentials_of(name) == []


def test_credential_with_queue_of_another_namespace_fails(
    live_db: None, seeded: dict[str, Any]
) -> None:
    _, other = run_seed()
    name = actor()
    result = issue(
        "--actor",
        name,
        "--namespace",
        seeded["data"]["namespace_id"],
        "--queue",
        other["queue_id"],
        "--permission",
        "tasks:read",
    )
    assert result.returncode != 0
    assert result.stdout == ""
    assert "queue" in result.stderr
    assert credentials_of(name) == []


@pytest.mark.parametrize(
    "args",
    [
        ["--permission", "tasks:write"],  # not a permission
        ["--permission", "TASKS:READ"],
        [],  # nothing granted
    ],
)
def test_credential_refuses_unknown_or_missing_permissions_C3(
    live_db: None, seeded: dict[str, Any], args: list[str]
) -> None:
    name = actor()
    result = issue("--actor", name, "--namespace", seeded["data"]["namespace_id"], *args)
    assert result.returncode != 0
    assert result.stdout == ""
    assert "permission" in result.stderr
    assert credentials_of(name) == []


def test_credential_tokens_are_distinct_for_the_same_actor(
    live_db: None, seeded: dict[str, Any]
) -> None:
    name = actor()
    args = ("--actor", name, "--namespace", seeded["data"]["namespace_id"], "--permission")
    first = issued_token(*args, "tasks:read")
    second = issued_token(*args, "tasks:read")
    assert first != second
    credentials = credentials_of(name)
    assert len(credentials) == 2
    assert len({credential.actor_id for credential in credentials}) == 1
