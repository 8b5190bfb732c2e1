"""The common rules of every recovery endpoint over real HTTP: authentication (C1), write headers
(C2), separate permissions (C3), scope that looks like absence (C4), ids and revisions (C5), the
order of checks (O3), idempotency keys (O4), health (O7) and the error envelope (E, E1)."""

import json
import re
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from orbit_console.ledger.auth import hash_token
from orbit_console.ledger.lifecycle import CredentialError, credential_issue, credential_revoke
from orbit_console.ledger.models import (
    Application,
    Credential,
    IdempotencyRecord,
    Namespace,
    OperationAudit,
    Permission,
    Queue,
    Task,
    TaskEvent,
)
from orbit_console.ledger.seed import ALL, seed_world
from orbit_console.lib.ids import new_id
from orbit_console.lib.rfc3339 import format_utc
from tests.support.orbit import (
    CANCELLED_REVISION,
    REVIEW_REVISION,
    bearer,
    get_task,
    new_key,
    post,
    retry_body,
    review_body,
)

HEX32 = re.compile(r"[0-9a-f]{32}")

# --- Helpers ----------------------------------------------------------------------------------


def assert_error(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """E: the status, and exactly ``{"request_id", "error": {"code", "message", ...}}``."""
    assert response.status_code == status, response.text
    assert response.headers.get("content-type", "").startswith("application/json"), response
    body = response.json()
    assert set(body) == {"request_id", "error"}, body
    assert HEX32.fullmatch(body["request_id"])
    assert response.headers["X-Request-Id"] == body["request_id"]
    error = body["error"]
    assert error["code"] == code, body
    assert isinstance(error["message"], str) and error["message"]
    return body


def without_request_id(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    body.pop("request_id")
    return body


def ledger_state(namespace_id: str, task_id: str) -> dict[str, Any]:
    """Everything a refused write must leave exactly as it was."""
    task = Task.objects.get(id=task_id)
    return {
        "task": (task.state, task.revision, task.result, task.updated_at, task.attempt_count),
        "audits": OperationAudit.objects.filter(task_id=task_id).count(),
        "receipts": IdempotencyRecord.objects.filter(namespace_id=namespace_id).count(),
        "successors": Task.objects.filter(retry_of=task_id).count(),
        "events": TaskEvent.objects.filter(task_id=task_id).count(),
    }


def first_audit_id(task_id: str) -> str:
    return (
        OperationAudit.objects.filter(task_id=task_id)
        .order_by("seq")
        .values_list("id", flat=True)[0]
    )


def endpoints(world: dict[str, Any]) -> list[tuple[str, str, str, dict[str, Any] | None]]:
    """Every /v1 endpoint as (name, method, url, body): the writes with a valid body."""
    review_id = world["tasks"]["needs_review"]
    failed_id = world["tasks"]["failed"]
    return [
        ("get_task", "GET", f"/v1/tasks/{review_id}", None),
        ("list_tasks", "GET", "/v1/tasks", None),
        ("credential", "GET", "/v1/credential", None),
        ("attempts", "GET", f"/v1/tasks/{review_id}/attempts", None),
        ("operations", "GET", f"/v1/tasks/{review_id}/operations", None),
        ("operation", "GET", f"/v1/tasks/{review_id}/operations/{first_audit_id(review_id)}", None),
        ("review", "POST", f"/v1/tasks/{review_id}:review", review_body()),
        ("retry", "POST", f"/v1/tasks/{failed_id}:retry", retry_body()),
    ]


def send(
    api: httpx.Client,
    method: str,
    url: str,
    body: dict[str, Any] | None,
    headers: dict[str, str],
    *,
    key: str | None = None,
) -> httpx.Response:
    if body is None:
        return api.request(method, url, headers=headers)
    write_headers = {"Content-Type": "application/json", "Idempotency-Key": key or new_key()}
    return api.request(method, url, content=json.dumps(body), headers={**write_headers, **headers})


def issue(world: dict[str, Any], permissions: list[str], **kwargs: Any) -> tuple[Credential, str]:
    namespace = Namespace.objects.get(id=world["namespace_id"])
    recovery = bool(set(permissions) - {Permission.READ})
    return credential_issue(
        namespace=namespace,
        actor_name=f"test-{new_id()[:8]}",
        permissions=permissions,
        recovery_access=recovery,
        **kwargs,
    )


# --- C1: authentication -----------------------------------------------------------------------

BAD_AUTHORIZATION: dict[str, str | None] = {
    "missing": None,
    "empty": "",
    "scheme_only": "Bearer",
    "basic": "Basic YWRtaW46YWRtaW4=",
    "wrong_scheme": "Token {admin}",
    "token_without_scheme": "{admin}",
    "extra_part": "Bearer {admin} extra",
    "bad_characters": "Bearer orb_abc$def",
    "too_long": "Bearer orb_" + "a" * 600,
    "unknown": "Bearer {unknown}",
    "altered": "Bearer {altered}",
    "stored_hash": "Bearer {hash}",
}


@pytest.mark.parametrize("kind", list(BAD_AUTHORIZATION))
def test_missing_malformed_or_unknown_token_is_unauthenticated_everywhere_C1(
    api: httpx.Client, untouched_world: dict[str, Any], live_db: None, kind: str
) -> None:
    world = untouched_world
    admin = world["tokens"]["admin"]
    template = BAD_AUTHORIZATION[kind]
    headers: dict[str, str] = {}
    if template is not None:
        headers["Authorization"] = template.format(
            admin=admin,
            unknown="orb_" + new_id() + new_id()[:11],
            altered=admin[:-1] + ("A" if admin[-1] != "A" else "B"),
            hash=hash_token(admin),
        )
    before = {t: ledger_state(world["namespace_id"], world["tasks"][t]) for t in world["tasks"]}

    for name, method, url, body in endpoints(world):
        response = send(api, method, url, body, headers)
        assert_error(response, 401, "UNAUTHENTICATED")
        assert response.headers["WWW-Authenticate"].startswith("Bearer"), name
        reference = send(api, method, url, body, {})
        assert without_request_id(response) == without_request_id(reference), name

    after = {t: ledger_state(world["namespace_id"], world["tasks"][t]) for t in world["tasks"]}
    assert after == before


def assert_locked_out(api: httpx.Client, world: dict[str, Any], token: str) -> None:
    """Every endpoint answers 401, word for word what a request without a token gets."""
    for name, method, url, body in endpoints(world):
        response = send(api, method, url, body, bearer(token))
        assert_error(response, 401, "UNAUTHENTICATED")
        anonymous = send(api, method, url, body, {})
        assert without_request_id(response) == without_request_id(anonymous), name


def test_expired_token_is_unauthenticated_C1(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    now = datetime.now(UTC)
    _, expired = issue(world, ALL, expires_at=now - timedelta(seconds=1))
    _, current = issue(world, ALL, expires_at=now + timedelta(hours=1))
    review_id = world["tasks"]["needs_review"]
    before = ledger_state(world["namespace_id"], review_id)

    assert_locked_out(api, world, expired)

    assert ledger_state(world["namespace_id"], review_id) == before
    assert get_task(api, review_id, current).status_code == 200


def test_revoked_token_is_unauthenticated_C1(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    credential, token = issue(world, ALL)
    review_id = world["tasks"]["needs_review"]
    assert get_task(api, review_id, token).status_code == 200

    credential_revoke(credential=credential)
    before = ledger_state(world["namespace_id"], review_id)

    assert_locked_out(api, world, token)
    assert ledger_state(world["namespace_id"], review_id) == before
    assert get_task(api, review_id, world["tokens"]["admin"]).status_code == 200


def test_token_of_disabled_application_is_unauthenticated_C1(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    admin = world["tokens"]["admin"]
    review_id = world["tasks"]["needs_review"]
    assert get_task(api, review_id, admin).status_code == 200
    application = Application.objects.get(namespace_id=world["namespace_id"])

    Application.objects.filter(id=application.id).update(enabled=False)
    before = ledger_state(world["namespace_id"], review_id)
    for token in (admin, world["tokens"]["reviewer"], world["tokens"]["reader"]):
        assert_locked_out(api, world, token)
    assert ledger_state(world["namespace_id"], review_id) == before

    Application.objects.filter(id=application.id).update(enabled=True)
    response = post(api, review_id, "review", admin, review_body())
    assert response.status_code == 200, response.text


def test_unauthenticated_write_leaves_its_key_unused_C1(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    key = new_key()
    refused = post(api, task_id, "review", "orb_not-a-token", review_body(), key=key)
    assert_error(refused, 401, "UNAUTHENTICATED")

    accepted = post(api, task_id, "review", world["tokens"]["admin"], review_body(), key=key)
    assert accepted.status_code == 200
    assert accepted.json()["data"]["deduplicated"] is False


# --- C2: write headers ------------------------------------------------------------------------

WRONG_CONTENT_TYPES = [
    None,
    "text/plain",
    "application/x-www-form-urlencoded",
    "application/jsonx",
    "application/problem+json",
    "application/json; charset=latin-1",
    "application/json; charset=utf-16",
]


@pytest.mark.parametrize("verb", ["review", "retry"])
@pytest.mark.parametrize("content_type", WRONG_CONTENT_TYPES)
def test_write_without_json_content_type_is_refused_C2(
    api: httpx.Client, world: dict[str, Any], live_db: None, verb: str, content_type: str | None
) -> None:
    task_id = world["tasks"]["needs_review" if verb == "review" else "failed"]
    body = review_body() if verb == "review" else retry_body()
    key = new_key()
    headers = {**bearer(world["tokens"]["admin"]), "Idempotency-Key": key}
    if content_type is not None:
        headers["Content-Type"] = content_type
    before = ledger_state(world["namespace_id"], task_id)

    response = api.post(f"/v1/tasks/{task_id}:{verb}", content=json.dumps(body), headers=headers)

    assert_error(response, 400, "INVALID_ARGUMENT")
    assert ledger_state(world["namespace_id"], task_id) == before
    accepted = post(api, task_id, verb, world["tokens"]["admin"], body, key=key)
    assert accepted.status_code in (200, 201), accepted.text
    assert accepted.json()["data"]["deduplicated"] is False


def test_multipart_write_is_refused_before_it_reaches_the_ledger_C2(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    """daphne (Twisted) parses multipart bodies itself and answers a bare 400 when the body is
    not the multipart it announces: not our envelope, but refused, and nothing touched."""
    task_id = world["tasks"]["needs_review"]
    key = new_key()
    before = ledger_state(world["namespace_id"], task_id)

    response = api.post(
        f"/v1/tasks/{task_id}:review",
        content=json.dumps(review_body()),
        headers={
            **bearer(world["tokens"]["admin"]),
            "Content-Type": "multipart/form-data; boundary=xyz",
            "Idempotency-Key": key,
        },
    )

    assert response.status_code == 400
    assert ledger_state(world["namespace_id"], task_id) == before
    accepted = post(api, task_id, "review", world["tokens"]["admin"], review_body(), key=key)
    assert accepted.status_code == 200


@pytest.mark.parametrize(
    "content_type",
    ["application/json", "application/json; charset=utf-8", "application/json;charset=UTF-8"],
)
def test_write_accepts_json_content_type_with_utf8_charset_C2(
    api: httpx.Client, world: dict[str, Any], content_type: str
) -> None:
    task_id = world["tasks"]["needs_review"]
    response = post(
        api,
        task_id,
        "review",
        world["tokens"]["admin"],
        review_body(),
        headers={"Content-Type": content_type},
    )
    assert response.status_code == 200, response.text


@pytest.mark.parametrize("verb", ["review", "retry"])
def test_write_without_idempotency_key_is_refused_C2_O4(
    api: httpx.Client, world: dict[str, Any], live_db: None, verb: str
) -> None:
    task_id = world["tasks"]["needs_review" if verb == "review" else "failed"]
    body = review_body() if verb == "review" else retry_body()
    before = ledger_state(world["namespace_id"], task_id)

    response = api.post(
        f"/v1/tasks/{task_id}:{verb}",
        content=json.dumps(body),
        headers={**bearer(world["tokens"]["admin"]), "Content-Type": "application/json"},
    )

    error = assert_error(response, 400, "INVALID_ARGUMENT")["error"]
    assert "Idempotency-Key" in error["message"]
    assert ledger_state(world["namespace_id"], task_id) == before


def test_reads_need_neither_content_type_nor_idempotency_key_C2(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    for name, method, url, body in endpoints(world):
        if body is None:
            response = api.request(method, url, headers=bearer(world["tokens"]["admin"]))
            assert response.status_code == 200, (name, response.text)


# --- C3: separate permissions -----------------------------------------------------------------

ACTIONS = ("read", "review", "retry", "audit_list", "audit_detail")


def perform(api: httpx.Client, world: dict[str, Any], action: str, token: str) -> httpx.Response:
    review_id = world["tasks"]["needs_review"]
    if action == "read":
        return get_task(api, review_id, token)
    if action == "review":
        return post(api, review_id, "review", token, review_body())
    if action == "retry":
        return post(api, world["tasks"]["failed"], "retry", token, retry_body())
    if action == "audit_list":
        return api.get(f"/v1/tasks/{review_id}/operations", headers=bearer(token))
    audit_id = first_audit_id(review_id)
    return api.get(f"/v1/tasks/{review_id}/operations/{audit_id}", headers=bearer(token))


READ, REVIEW, RETRY, AUDIT = (
    Permission.READ,
    Permission.REVIEW,
    Permission.RETRY,
    Permission.AUDIT_READ,
)
PERMISSION_CASES: dict[str, tuple[list[str], set[str]]] = {
    # credential: (its permissions, the actions it may perform)
    "admin": (ALL, set(ACTIONS)),
    "reviewer": ([READ, REVIEW], {"read", "review"}),
    "retrier": ([READ, RETRY], {"read", "retry"}),
    "auditor": ([READ, AUDIT], {"read", "audit_list", "audit_detail"}),
    "reader": ([READ], {"read"}),
    "review_only": ([REVIEW], {"review"}),
    "retry_only": ([RETRY], {"retry"}),
    "audit_only": ([AUDIT], {"audit_list", "audit_detail"}),
    "review_and_retry": ([REVIEW, RETRY], {"review", "retry"}),
}


@pytest.mark.parametrize("case", list(PERMISSION_CASES))
def test_each_permission_is_separate_C3(
    api: httpx.Client, world: dict[str, Any], live_db: None, case: str
) -> None:
    permissions, allowed = PERMISSION_CASES[case]
    _, token = issue(world, permissions)
    tasks = (world["tasks"]["needs_review"], world["tasks"]["failed"])
    before = {task_id: ledger_state(world["namespace_id"], task_id) for task_id in tasks}

    for action in ACTIONS:
        if action not in allowed:
            assert_error(perform(api, world, action, token), 403, "PERMISSION_DENIED")
    assert {t: ledger_state(world["namespace_id"], t) for t in tasks} == before

    for action in ACTIONS:
        if action in allowed:
            response = perform(api, world, action, token)
            assert response.status_code in (200, 201), (action, response.text)


def test_seeded_role_tokens_hold_only_their_permission_C3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    tokens = world["tokens"]
    denied = [
        ("reader", "review"),
        ("reader", "retry"),
        ("reader", "audit_list"),
        ("auditor", "review"),
        ("auditor", "retry"),
        ("reviewer", "retry"),
        ("reviewer", "audit_list"),
        ("reviewer", "audit_detail"),
        ("retrier", "review"),
        ("retrier", "audit_list"),
    ]
    for role, action in denied:
        assert_error(perform(api, world, action, tokens[role]), 403, "PERMISSION_DENIED")
    assert perform(api, world, "audit_list", tokens["auditor"]).status_code == 200
    assert perform(api, world, "review", tokens["reviewer"]).status_code == 200
    assert perform(api, world, "retry", tokens["retrier"]).status_code == 201


def test_permission_is_checked_again_on_every_call_C3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    credential, token = issue(world, [READ, REVIEW])
    first = post(api, world["tasks"]["needs_review"], "review", token, review_body())
    assert first.status_code == 200

    Credential.objects.filter(id=credential.id).update(permissions=READ)
    task_id = world["tasks"]["needs_review_2"]
    before = ledger_state(world["namespace_id"], task_id)
    second = post(api, task_id, "review", token, review_body())

    assert_error(second, 403, "PERMISSION_DENIED")
    assert ledger_state(world["namespace_id"], task_id) == before


@pytest.mark.parametrize("permission", [REVIEW, RETRY, AUDIT])
def test_credential_issue_refuses_recovery_permission_without_recovery_access_C3(
    world: dict[str, Any], permission: str
) -> None:
    namespace = Namespace.objects.get(id=world["namespace_id"])
    count = Credential.objects.filter(namespace=namespace).count()

    with pytest.raises(CredentialError):
        credential_issue(
            namespace=namespace, actor_name="submitter", permissions=[READ, permission]
        )

    assert Credential.objects.filter(namespace=namespace).count() == count


def test_default_credential_holds_no_recovery_permission_C3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    namespace = Namespace.objects.get(id=world["namespace_id"])
    plain, token = credential_issue(namespace=namespace, actor_name="worker", permissions=[READ])
    assert plain.permission_set == {READ}
    assert_error(perform(api, world, "review", token), 403, "PERMISSION_DENIED")

    flagged, _ = credential_issue(
        namespace=namespace, actor_name="operator", permissions=[READ], recovery_access=True
    )
    assert flagged.permission_set == {READ, REVIEW, RETRY, AUDIT}


# --- C4: scope looks like absence -------------------------------------------------------------


def scoped_calls(task_id: str, audit_id: str) -> list[tuple[str, str, dict[str, Any] | None]]:
    return [
        ("GET", f"/v1/tasks/{task_id}", None),
        ("GET", f"/v1/tasks/{task_id}/attempts", None),
        ("GET", f"/v1/tasks/{task_id}/operations", None),
        ("GET", f"/v1/tasks/{task_id}/operations/{audit_id}", None),
        ("POST", f"/v1/tasks/{task_id}:review", review_body()),
        ("POST", f"/v1/tasks/{task_id}:retry", retry_body()),
        ("POST", f"/v1/tasks/{task_id}:retry", retry_body(CANCELLED_REVISION)),
    ]


def assert_hidden_like_missing(
    api: httpx.Client, world: dict[str, Any], token: str, hidden_task: str
) -> None:
    audit_id = first_audit_id(hidden_task)
    missing_task = new_id()
    hidden = scoped_calls(hidden_task, audit_id)
    missing = scoped_calls(missing_task, new_id())
    for (method, url, body), (_, missing_url, _) in zip(hidden, missing, strict=True):
        answer = send(api, method, url, body, bearer(token))
        reference = send(api, method, missing_url, body, bearer(token))
        assert_error(answer, 404, "NOT_FOUND")
        assert_error(reference, 404, "NOT_FOUND")
        assert without_request_id(answer) == without_request_id(reference), url
        assert answer.headers["content-type"] == reference.headers["content-type"]


@pytest.mark.parametrize("task", ["needs_review", "failed", "cancelled"])
def test_task_of_another_namespace_is_indistinguishable_from_missing_C4(
    api: httpx.Client, world: dict[str, Any], live_db: None, task: str
) -> None:
    task_id = world["tasks"][task]
    before = ledger_state(world["namespace_id"], task_id)

    assert_hidden_like_missing(api, world, world["tokens"]["other_namespace"], task_id)

    assert ledger_state(world["namespace_id"], task_id) == before


def test_task_of_another_world_is_indistinguishable_from_missing_C4(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    elsewhere = seed_world(label="elsewhere")
    task_id = elsewhere["tasks"]["needs_review"]
    before = ledger_state(elsewhere["namespace_id"], task_id)

    assert_hidden_like_missing(api, world, world["tokens"]["admin"], task_id)

    assert ledger_state(elsewhere["namespace_id"], task_id) == before


@pytest.mark.parametrize("task", ["needs_review", "failed"])
def test_task_outside_queue_scope_is_indistinguishable_from_missing_C4(
    api: httpx.Client, world: dict[str, Any], live_db: None, task: str
) -> None:
    task_id = world["tasks"][task]
    before = ledger_state(world["namespace_id"], task_id)

    assert_hidden_like_missing(api, world, world["tokens"]["other_queue"], task_id)

    assert ledger_state(world["namespace_id"], task_id) == before


def test_hidden_tasks_do_not_appear_in_the_task_list_C4(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    for token in ("other_namespace", "other_queue"):
        response = api.get("/v1/tasks", headers=bearer(world["tokens"][token]))
        assert response.status_code == 200
        listed = {item["id"] for item in response.json()["data"]["items"]}
        assert not listed & set(world["tasks"].values())


def test_audit_record_of_another_task_is_indistinguishable_from_missing_C4(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]
    foreign_audit = first_audit_id(world["tasks"]["failed"])
    headers = bearer(world["tokens"]["admin"])

    answer = api.get(f"/v1/tasks/{task_id}/operations/{foreign_audit}", headers=headers)
    reference = api.get(f"/v1/tasks/{task_id}/operations/{new_id()}", headers=headers)

    assert_error(answer, 404, "NOT_FOUND")
    assert without_request_id(answer) == without_request_id(reference)


def test_queue_scope_is_checked_again_on_every_call_C4(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    main_queue = Queue.objects.get(id=world["queue_id"])
    other_queue = Queue.objects.get(namespace_id=world["namespace_id"], name="reports")
    credential, token = issue(world, ALL, queues=[main_queue])
    task_id = world["tasks"]["needs_review"]
    assert get_task(api, task_id, token).status_code == 200

    credential.queues.set([other_queue])
    before = ledger_state(world["namespace_id"], task_id)

    assert_error(get_task(api, task_id, token), 404, "NOT_FOUND")
    assert_error(post(api, task_id, "review", token, review_body()), 404, "NOT_FOUND")
    assert ledger_state(world["namespace_id"], task_id) == before


# --- C5: ids and revisions --------------------------------------------------------------------


def malformed_ids(task_id: str) -> dict[str, str]:
    """Near misses of a real id: if the server normalised any of them, it would find the task."""
    return {
        "uppercase": task_id.upper(),
        "one_uppercase": re.sub("[a-f]", lambda m: m.group().upper(), task_id, count=1),
        "short": task_id[:-1],
        "long": task_id + "0",
        "uuid_form": f"{task_id[:8]}-{task_id[8:12]}-{task_id[12:16]}-{task_id[16:20]}-"
        f"{task_id[20:]}",
        "leading_space": "%20" + task_id,
        "trailing_newline": task_id + "%0A",
        "non_hex": "g" * 32,
        "arabic_digits": "%D9%A1" * 32,
        "fullwidth_digit": "%EF%BC%91" + task_id[1:],
    }


@pytest.mark.parametrize(
    "variant",
    list(malformed_ids("0" * 32)),
)
def test_malformed_task_id_is_invalid_everywhere_C5(
    api: httpx.Client, untouched_world: dict[str, Any], live_db: None, variant: str
) -> None:
    world = untouched_world
    task_id = world["tasks"]["needs_review"]
    bad = malformed_ids(task_id)[variant]
    audit_id = first_audit_id(task_id)
    before = ledger_state(world["namespace_id"], task_id)
    calls = [
        ("GET", f"/v1/tasks/{bad}", None),
        ("GET", f"/v1/tasks/{bad}/attempts", None),
        ("GET", f"/v1/tasks/{bad}/operations", None),
        ("GET", f"/v1/tasks/{bad}/operations/{audit_id}", None),
        ("POST", f"/v1/tasks/{bad}:review", review_body()),
        ("POST", f"/v1/tasks/{bad}:retry", retry_body()),
    ]
    for method, url, body in calls:
        response = send(api, method, url, body, bearer(world["tokens"]["admin"]))
        assert_error(response, 400, "INVALID_ARGUMENT")

    assert ledger_state(world["namespace_id"], task_id) == before


@pytest.mark.parametrize("variant", ["uppercase", "short", "long", "non_hex", "uuid_form"])
def test_malformed_audit_id_is_invalid_C5(
    api: httpx.Client, untouched_world: dict[str, Any], live_db: None, variant: str
) -> None:
    world = untouched_world
    task_id = world["tasks"]["needs_review"]
    bad = malformed_ids(first_audit_id(task_id))[variant]
    response = api.get(
        f"/v1/tasks/{task_id}/operations/{bad}", headers=bearer(world["tokens"]["admin"])
    )
    assert_error(response, 400, "INVALID_ARGUMENT")


BAD_REVISIONS: list[Any] = [
    "0",
    "01",
    "003",
    "+3",
    "-3",
    " 3",
    "3 ",
    "3\n",
    "",
    "3.0",
    "3e0",
    "0x3",
    "\u0663",  # ARABIC-INDIC DIGIT THREE: str.isdigit() is true for it
    "\uff13",  # FULLWIDTH DIGIT THREE
    "\u00b3",  # SUPERSCRIPT THREE
    "18446744073709551616",  # 2**64
    "99999999999999999999999999",
    "9" * 5000,  # more digits than Python's int() converts by default
    3,
    3.0,
    True,
    None,
    ["3"],
    {"revision": "3"},
]


@pytest.mark.parametrize("verb", ["review", "retry"])
@pytest.mark.parametrize("revision", BAD_REVISIONS, ids=lambda value: repr(value)[:24])
def test_malformed_expected_revision_is_invalid_C5(
    api: httpx.Client, untouched_world: dict[str, Any], live_db: None, verb: str, revision: Any
) -> None:
    world = untouched_world
    task_id = world["tasks"]["needs_review" if verb == "review" else "failed"]
    body = review_body() if verb == "review" else retry_body()
    body["expected_revision"] = revision
    before = ledger_state(world["namespace_id"], task_id)

    response = post(api, task_id, verb, world["tokens"]["admin"], body)

    error = assert_error(response, 400, "INVALID_ARGUMENT")["error"]
    assert "expected_revision" in error["message"]
    assert ledger_state(world["namespace_id"], task_id) == before


@pytest.mark.parametrize("verb", ["review", "retry"])
def test_largest_uint64_revision_is_well_formed_but_stale_C5(
    api: httpx.Client, world: dict[str, Any], verb: str
) -> None:
    task_id = world["tasks"]["needs_review" if verb == "review" else "failed"]
    body = review_body() if verb == "review" else retry_body()
    body["expected_revision"] = str(2**64 - 1)
    response = post(api, task_id, verb, world["tokens"]["admin"], body)
    assert_error(response, 409, "STATE_CONFLICT")


def test_revisions_travel_as_strings_C5(api: httpx.Client, world: dict[str, Any]) -> None:
    response = get_task(api, world["tasks"]["needs_review"], world["tokens"]["admin"])
    assert response.json()["data"]["revision"] == REVIEW_REVISION
    assert '"revision":"3"' in response.text


# --- O3: order of checks ----------------------------------------------------------------------

BAD_BODY = b'{"expected_revision": 3, "reason": ""'


@pytest.mark.parametrize("verb", ["review", "retry"])
def test_no_token_wins_over_everything_else_O3(
    api: httpx.Client, world: dict[str, Any], verb: str
) -> None:
    """401 before 403, 400 (path, headers, body) and 404."""
    for task_id in (world["tasks"]["failed"], "NOT-AN-ID", new_id()):
        response = api.post(
            f"/v1/tasks/{task_id}:{verb}?unknown=1",
            content=BAD_BODY,
            headers={"Content-Type": "text/plain"},
        )
        assert_error(response, 401, "UNAUTHENTICATED")


@pytest.mark.parametrize("verb", ["review", "retry"])
def test_missing_permission_wins_over_bad_request_and_missing_task_O3(
    api: httpx.Client, world: dict[str, Any], verb: str
) -> None:
    reader = world["tokens"]["reader"]
    other_verb_holder = world["tokens"]["retrier" if verb == "review" else "reviewer"]
    for token in (reader, other_verb_holder):
        for task_id in (world["tasks"]["needs_review"], "NOT-AN-ID", new_id()):
            response = api.post(
                f"/v1/tasks/{task_id}:{verb}",
                content=BAD_BODY,
                headers={**bearer(token), "Content-Type": "text/plain"},
            )
            assert_error(response, 403, "PERMISSION_DENIED")


def test_malformed_path_id_wins_over_missing_task_O3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    elsewhere = seed_world(label="elsewhere")
    foreign = elsewhere["tasks"]["needs_review"]
    reviewer = world["tokens"]["reviewer"]
    for task_id in (foreign.upper(), new_id().upper()):
        response = post(api, task_id, "review", reviewer, review_body())
        assert_error(response, 400, "INVALID_ARGUMENT")
    assert_error(post(api, foreign, "review", reviewer, review_body()), 404, "NOT_FOUND")


@pytest.mark.parametrize("verb", ["review", "retry"])
def test_bad_request_wins_over_hidden_or_missing_task_O3(
    api: httpx.Client, world: dict[str, Any], live_db: None, verb: str
) -> None:
    elsewhere = seed_world(label="elsewhere")
    token = world["tokens"]["reviewer" if verb == "review" else "retrier"]
    hidden = [elsewhere["tasks"]["needs_review"], elsewhere["tasks"]["failed"], new_id()]
    good_body = json.dumps(review_body() if verb == "review" else retry_body())
    for task_id in hidden:
        url = f"/v1/tasks/{task_id}:{verb}"
        bad_body = post(api, task_id, verb, token, BAD_BODY)
        no_key = api.post(
            url, content=good_body, headers={**bearer(token), "Content-Type": "application/json"}
        )
        bad_type = api.post(
            url,
            content=good_body,
            headers={**bearer(token), "Content-Type": "text/plain", "Idempotency-Key": new_key()},
        )
        with_query = api.post(
            url + "?dry_run=1",
            content=good_body,
            headers={**bearer(token), "Content-Type": "application/json", "Idempotency-Key": "k"},
        )
        for response in (bad_body, no_key, bad_type, with_query):
            assert_error(response, 400, "INVALID_ARGUMENT")
        good = post(api, task_id, verb, token, good_body)
        assert_error(good, 404, "NOT_FOUND")


def test_missing_task_wins_over_idempotency_O3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    """The other namespace's credential, sending the exact request that already succeeded here,
    gets 404 — not the stored receipt."""
    task_id = world["tasks"]["needs_review"]
    key = new_key()
    first = post(api, task_id, "review", world["tokens"]["admin"], review_body(), key=key)
    assert first.status_code == 200
    for token in ("other_namespace", "other_queue"):
        replay = post(api, task_id, "review", world["tokens"][token], review_body(), key=key)
        assert_error(replay, 404, "NOT_FOUND")
        assert first.json()["data"]["audit_id"] not in replay.text


def test_static_rules_win_over_idempotency_O3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    """A malformed body with a used key is a 400, not IDEMPOTENCY_CONFLICT."""
    task_id = world["tasks"]["needs_review"]
    key = new_key()
    token = world["tokens"]["admin"]
    assert post(api, task_id, "review", token, review_body(), key=key).status_code == 200
    before = ledger_state(world["namespace_id"], task_id)

    for body in (review_body(reason=" "), review_body(outcome="CANCELLED"), BAD_BODY):
        assert_error(post(api, task_id, "review", token, body, key=key), 400, "INVALID_ARGUMENT")

    assert ledger_state(world["namespace_id"], task_id) == before


def test_static_rules_win_over_state_conflict_O3(api: httpx.Client, world: dict[str, Any]) -> None:
    token = world["tokens"]["admin"]
    for task, verb in [("succeeded", "review"), ("succeeded", "retry"), ("failed", "review")]:
        body = review_body(reason="") if verb == "review" else retry_body(reason="")
        response = post(api, world["tasks"][task], verb, token, body)
        assert_error(response, 400, "INVALID_ARGUMENT")


def test_replay_wins_over_state_conflict_O3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["needs_review"]
    token = world["tokens"]["admin"]
    key = new_key()
    first = post(api, task_id, "review", token, review_body(), key=key)
    assert first.status_code == 200
    assert Task.objects.get(id=task_id).state == "FAILED"

    replay = post(api, task_id, "review", token, review_body(), key=key)
    other_key = post(api, task_id, "review", token, review_body())

    assert replay.status_code == 200
    assert replay.json()["data"]["deduplicated"] is True
    assert replay.json()["data"]["audit_id"] == first.json()["data"]["audit_id"]
    assert_error(other_key, 409, "STATE_CONFLICT")


def test_idempotency_conflict_wins_over_state_conflict_O3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    token = world["tokens"]["admin"]
    key = new_key()
    assert post(api, task_id, "review", token, review_body(), key=key).status_code == 200

    different = post(api, task_id, "review", token, review_body(outcome="SUCCEEDED"), key=key)
    stale = post(api, task_id, "review", token, review_body(revision="1"), key=key)

    assert_error(different, 409, "IDEMPOTENCY_CONFLICT")
    assert_error(stale, 409, "IDEMPOTENCY_CONFLICT")


def test_idempotency_conflict_wins_over_time_rules_O3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["failed"]
    token = world["tokens"]["admin"]
    key = new_key()
    assert post(api, task_id, "retry", token, retry_body(), key=key).status_code == 201

    past = retry_body(available_at="2020-01-01T00:00:00Z")
    short = retry_body(task_timeout_ms=1)
    assert_error(post(api, task_id, "retry", token, past, key=key), 409, "IDEMPOTENCY_CONFLICT")
    assert_error(post(api, task_id, "retry", token, short, key=key), 409, "IDEMPOTENCY_CONFLICT")


def test_replay_returns_receipt_although_its_times_went_stale_O3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["failed"]
    token = world["tokens"]["admin"]
    key = new_key()
    deadline = format_utc(datetime.now(UTC) + timedelta(seconds=1.5))
    body = retry_body(start_deadline_at=deadline)
    first = post(api, task_id, "retry", token, body, key=key)
    assert first.status_code == 201, first.text

    time.sleep(2)
    replay = post(api, task_id, "retry", token, body, key=key)
    fresh = post(api, task_id, "retry", token, body)

    assert replay.status_code == 200, replay.text
    assert replay.json()["data"]["deduplicated"] is True
    assert replay.json()["data"]["audit_id"] == first.json()["data"]["audit_id"]
    # A new key is judged afresh: the successor now exists (STATE_CONFLICT comes before the
    # time-dependent 400 the stale start_deadline_at would also earn).
    assert_error(fresh, 409, "STATE_CONFLICT")


def test_state_conflict_and_time_rules_win_over_full_queue_O3(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["queue_full_failed"]
    token = world["tokens"]["admin"]
    before = ledger_state(world["namespace_id"], task_id)

    stale = post(api, task_id, "retry", token, retry_body(revision="2"))
    past = post(api, task_id, "retry", token, retry_body(available_at="2020-01-01T00:00:00Z"))
    short = post(api, task_id, "retry", token, retry_body(task_timeout_ms=5000))
    full = post(api, task_id, "retry", token, retry_body())

    assert_error(stale, 409, "STATE_CONFLICT")
    assert_error(past, 400, "INVALID_ARGUMENT")
    assert_error(short, 400, "INVALID_ARGUMENT")
    body = assert_error(full, 429, "QUEUE_FULL")
    assert isinstance(body["error"]["retry_after_ms"], int) and body["error"]["retry_after_ms"] > 0
    assert int(full.headers["Retry-After"]) >= 1
    assert ledger_state(world["namespace_id"], task_id) == before


def test_static_time_format_wins_over_missing_task_O3(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    body = retry_body(available_at="2026-01-01T00:00:00+08:00")
    response = post(api, new_id(), "retry", world["tokens"]["admin"], body)
    assert_error(response, 400, "INVALID_ARGUMENT")


# --- O4: the Idempotency-Key header -----------------------------------------------------------

BAD_KEYS: dict[str, bytes] = {
    "empty": b"",
    "too_long": b"k" * 256,
    "inner_space": b"my key",
    "tab": b"my\tkey",
    "non_ascii": "cl\u00e9".encode(),
    "cjk": "\u952e".encode(),
}


@pytest.mark.parametrize("verb", ["review", "retry"])
@pytest.mark.parametrize("kind", list(BAD_KEYS))
def test_malformed_idempotency_key_is_invalid_O4(
    api: httpx.Client, untouched_world: dict[str, Any], live_db: None, verb: str, kind: str
) -> None:
    world = untouched_world
    task_id = world["tasks"]["needs_review" if verb == "review" else "failed"]
    body = review_body() if verb == "review" else retry_body()
    before = ledger_state(world["namespace_id"], task_id)

    response = api.post(
        f"/v1/tasks/{task_id}:{verb}",
        content=json.dumps(body),
        headers={
            b"Authorization": f"Bearer {world['tokens']['admin']}".encode(),
            b"Content-Type": b"application/json",
            b"Idempotency-Key": BAD_KEYS[kind],
        },
    )

    error = assert_error(response, 400, "INVALID_ARGUMENT")["error"]
    assert "Idempotency-Key" in error["message"]
    assert ledger_state(world["namespace_id"], task_id) == before


@pytest.mark.parametrize(
    "key",
    [
        "k",
        "k" * 255,
        "!\"#$%&'()*+,-./0123456789:;<=>?@ABCXYZ[\\]^_`abcxyz{|}~",
        "550e8400-e29b-41d4-a716-446655440000",
    ],
    ids=["one_char", "255_chars", "all_punctuation", "uuid"],
)
def test_visible_ascii_idempotency_key_is_accepted_and_replays_O4(
    api: httpx.Client, world: dict[str, Any], key: str
) -> None:
    task_id = world["tasks"]["needs_review"]
    token = world["tokens"]["admin"]
    first = post(api, task_id, "review", token, review_body(), key=key)
    replay = post(api, task_id, "review", token, review_body(), key=key)

    assert first.status_code == 200, first.text
    assert replay.status_code == 200
    assert replay.json()["data"]["deduplicated"] is True
    assert replay.json()["data"]["audit_id"] == first.json()["data"]["audit_id"]


def test_idempotency_keys_are_case_sensitive_O4(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    task_id = world["tasks"]["failed"]
    token = world["tokens"]["admin"]
    lower = post(api, task_id, "retry", token, retry_body(), key="abc")
    upper = post(api, task_id, "retry", token, retry_body(), key="ABC")
    again = post(api, task_id, "retry", token, retry_body(), key="abc")

    assert lower.status_code == 201
    # "ABC" is a new key: judged afresh, it meets the successor "abc" created.
    assert_error(upper, 409, "STATE_CONFLICT")
    assert again.status_code == 200 and again.json()["data"]["deduplicated"] is True
    assert IdempotencyRecord.objects.filter(task_id=task_id).count() == 1


def test_review_keys_differing_only_in_case_do_not_share_a_receipt_O4(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    task_id = world["tasks"]["needs_review"]
    token = world["tokens"]["admin"]
    assert post(api, task_id, "review", token, review_body(), key="Key-1").status_code == 200
    assert_error(
        post(api, task_id, "review", token, review_body(), key="key-1"), 409, "STATE_CONFLICT"
    )
    assert_error(
        post(api, task_id, "review", token, review_body(), key="KEY-1"), 409, "STATE_CONFLICT"
    )


def test_body_is_compared_as_parsed_json_O4(api: httpx.Client, world: dict[str, Any]) -> None:
    task_id = world["tasks"]["needs_review"]
    token = world["tokens"]["admin"]
    key = new_key()
    body = review_body(result={"sequence": 9007199254740993, "ratio": 0.10})
    first = post(api, task_id, "review", token, json.dumps(body), key=key)
    assert first.status_code == 200

    reordered = (
        "{\n"
        + ",\n  ".join(
            f"{json.dumps(name)} : {json.dumps(body[name])}" for name in reversed(list(body))
        )
        + "\n}"
    )
    replay = post(api, task_id, "review", token, reordered, key=key)
    near = json.dumps(body).replace("9007199254740993", "9007199254740992")
    conflict = post(api, task_id, "review", token, near, key=key)

    assert replay.status_code == 200
    assert replay.json()["data"]["deduplicated"] is True
    assert_error(conflict, 409, "IDEMPOTENCY_CONFLICT")


def test_same_key_on_two_tasks_is_two_operations_O4(
    api: httpx.Client, world: dict[str, Any]
) -> None:
    token = world["tokens"]["admin"]
    key = new_key()
    first = post(api, world["tasks"]["needs_review"], "review", token, review_body(), key=key)
    second = post(api, world["tasks"]["needs_review_2"], "review", token, review_body(), key=key)
    assert first.status_code == second.status_code == 200
    assert second.json()["data"]["deduplicated"] is False
    assert first.json()["data"]["audit_id"] != second.json()["data"]["audit_id"]


# --- O7: health -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/health/live", "/health/ready"])
def test_health_needs_no_token_and_answers_json_O7(api: httpx.Client, path: str) -> None:
    for headers in ({}, {"Authorization": "Bearer orb_not-a-token"}):
        response = api.get(path, headers=headers)
        assert response.status_code == 200, response.text
        assert response.headers["content-type"].startswith("application/json")
        body = response.json()
        assert isinstance(body, dict) and body["status"] in ("live", "ready")
        assert HEX32.fullmatch(response.headers["X-Request-Id"])


def test_ready_reports_its_checks_O7(api: httpx.Client) -> None:
    body = api.get("/health/ready").json()
    assert body["status"] == "ready"
    assert set(body["checks"].values()) == {"ok"}


# --- E: envelopes -----------------------------------------------------------------------------


def test_success_responses_carry_the_request_id_in_body_and_header_E(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    ids: set[str] = set()
    for name, method, url, body in endpoints(world):
        response = send(
            api, method, url, body, {**bearer(world["tokens"]["admin"]), "X-Request-Id": "f" * 32}
        )
        assert response.status_code in (200, 201), (name, response.text)
        payload = response.json()
        assert set(payload) == {"request_id", "data"}, name
        assert HEX32.fullmatch(payload["request_id"])
        assert response.headers["X-Request-Id"] == payload["request_id"]
        ids.add(payload["request_id"])
    assert len(ids) == len(endpoints(world))
    assert "f" * 32 not in ids  # never taken from the client


def test_every_error_code_uses_the_envelope_E(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    admin = world["tokens"]["admin"]
    review_id = world["tasks"]["needs_review"]
    key = new_key()
    assert post(api, review_id, "review", admin, review_body(), key=key).status_code == 200
    cases = [
        (post(api, review_id, "review", admin, b"[]"), 400, "INVALID_ARGUMENT"),
        (post(api, review_id, "review", "orb_nobody", review_body()), 401, "UNAUTHENTICATED"),
        (
            post(api, review_id, "review", world["tokens"]["reader"], review_body()),
            403,
            "PERMISSION_DENIED",
        ),
        (get_task(api, new_id(), admin), 404, "NOT_FOUND"),
        (api.delete(f"/v1/tasks/{review_id}", headers=bearer(admin)), 405, "METHOD_NOT_ALLOWED"),
        (post(api, review_id, "review", admin, review_body()), 409, "STATE_CONFLICT"),
        (
            post(api, review_id, "review", admin, review_body(reason="other"), key=key),
            409,
            "IDEMPOTENCY_CONFLICT",
        ),
        (
            post(api, world["tasks"]["queue_full_failed"], "retry", admin, retry_body()),
            429,
            "QUEUE_FULL",
        ),
    ]
    request_ids = set()
    for response, status, code in cases:
        request_ids.add(assert_error(response, status, code)["request_id"])
    assert len(request_ids) == len(cases)


UNKNOWN_PATHS = [
    ("GET", "/v1/"),
    ("GET", "/v1/nothing"),
    ("GET", "/v1/tasks/"),
    ("GET", "/v1/task/{id}"),
    ("GET", "/v1/tasks/{id}/"),
    ("GET", "/v1/tasks/{id}/events"),
    ("GET", "/v1/tasks/{id}/operations/{audit}/before"),
    ("POST", "/v1/tasks/{id}:cancel"),
    ("POST", "/v1/tasks/{id}:REVIEW"),
    ("POST", "/v1/tasks/{id}:Review"),
    ("POST", "/v1/tasks/{id}:review:retry"),
    ("POST", "/v1/tasks/{id}:"),
    ("POST", "/v1/tasks/{id}:submit"),
]


@pytest.mark.parametrize(("method", "path"), UNKNOWN_PATHS)
def test_unknown_endpoint_is_not_found_in_the_envelope_E1(
    api: httpx.Client, untouched_world: dict[str, Any], live_db: None, method: str, path: str
) -> None:
    world = untouched_world
    task_id = world["tasks"]["needs_review"]
    url = path.format(id=task_id, audit=first_audit_id(task_id))
    before = ledger_state(world["namespace_id"], task_id)

    body = review_body() if method == "POST" else None

    response = send(api, method, url, body, bearer(world["tokens"]["admin"]))

    assert_error(response, 404, "NOT_FOUND")
    assert ledger_state(world["namespace_id"], task_id) == before


WRONG_METHODS = [
    ("GET", "/v1/tasks/{id}:review"),
    ("GET", "/v1/tasks/{id}:retry"),
    ("PUT", "/v1/tasks/{id}:review"),
    ("DELETE", "/v1/tasks/{id}"),
    ("PUT", "/v1/tasks/{id}"),
    ("PATCH", "/v1/tasks/{id}"),
    ("POST", "/v1/tasks/{id}"),
    ("POST", "/v1/tasks"),
    ("POST", "/v1/tasks/{id}/operations"),
    ("DELETE", "/v1/tasks/{id}/operations/{audit}"),
    ("POST", "/v1/tasks/{id}/attempts"),
]


@pytest.mark.parametrize(("method", "path"), WRONG_METHODS)
def test_wrong_method_is_405_in_the_envelope_E(
    api: httpx.Client, untouched_world: dict[str, Any], live_db: None, method: str, path: str
) -> None:
    world = untouched_world
    task_id = world["tasks"]["needs_review"]
    url = path.format(id=task_id, audit=first_audit_id(task_id))
    before = ledger_state(world["namespace_id"], task_id)

    response = send(api, method, url, review_body(), bearer(world["tokens"]["admin"]))

    assert_error(response, 405, "METHOD_NOT_ALLOWED")
    expected = "POST" if url.endswith((":review", ":retry")) else "GET"
    assert response.headers["Allow"] == expected
    assert ledger_state(world["namespace_id"], task_id) == before
