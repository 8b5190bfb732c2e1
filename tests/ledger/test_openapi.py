"""GET /v1/openapi.json — the contract is complete and true.

Every route of orbit_console/ledger/api/urls.py is documented, every documented operation
exists, the documented query parameters are exactly the accepted ones, and real responses of
every endpoint, successes and errors, validate against the schema documented for their status.
"""

import copy
import json
import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from django.urls import URLPattern, resolve
from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from orbit_console.events import urls as events_urls
from orbit_console.ledger.api import urls as api_urls
from orbit_console.ledger.lifecycle import actor_id_for, credential_issue, task_accept_for_plan
from orbit_console.ledger.models import Namespace, OperationAudit, Permission, Queue
from orbit_console.ledger.seed import PAYLOAD
from orbit_console.lib.ids import new_id
from tests.support.orbit import bearer, new_key, post, retry_body, review_body

METHODS = ("get", "post", "put", "patch", "delete")
DOCUMENTS = {"/v1/openapi.json", "/v1/asyncapi.json"}  # no credential, no envelope
# About the credential's own scope, not something to look up: nothing to be not found.
SCOPE_WIDE = {("/v1/credential", "get"), ("/v1/subscriptions", "get")}
NO_SUCH_ENDPOINT = "no such endpoint"
CUSTOM_VERBS = {"review", "retry"}  # views.task_resource


# --- Helpers ----------------------------------------------------------------------------------


@pytest.fixture
def document(api: httpx.Client) -> dict[str, Any]:
    response = api.get("/v1/openapi.json")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    return response.json()


def validator(document: dict[str, Any], schema: dict[str, Any]) -> Draft202012Validator:
    """A validator for ``schema`` with the document's components embedded, so that the
    ``#/components/schemas/...`` references resolve."""
    return Draft202012Validator({"allOf": [schema], "components": document["components"]})


def component(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def response_schema(
    document: dict[str, Any], template: str, method: str, status: int
) -> dict[str, Any]:
    responses = document["paths"][template][method]["responses"]
    assert str(status) in responses, f"{method.upper()} {template} does not document {status}"
    return responses[str(status)]["content"]["application/json"]["schema"]


def fill(template: str, **values: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), new_id()), template)


def refs(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield value
            else:
                yield from refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from refs(value)


def pointer(document: dict[str, Any], ref: str) -> Any:
    assert ref.startswith("#/"), ref
    node: Any = document
    for part in ref[2:].split("/"):
        node = node[part.replace("~1", "/").replace("~0", "~")]
    return node


def operations(document: dict[str, Any]) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for template, item in document["paths"].items():
        for method, operation in item.items():
            if method in METHODS:
                yield template, method, operation


def issue(world: dict[str, Any], permissions: list[str]) -> str:
    _, token = credential_issue(
        namespace=Namespace.objects.get(id=world["namespace_id"]),
        actor_name=f"issued-{new_id()[:8]}",
        permissions=permissions,
        recovery_access=True,
    )
    return token


def route_of(path: str) -> str:
    return resolve(path).route


# --- The document -----------------------------------------------------------------------------


def test_openapi_document_is_openapi_3_1(document: dict[str, Any]) -> None:
    assert re.fullmatch(r"3\.1\.\d+", document["openapi"])
    assert document["info"]["title"] and document["info"]["version"]
    assert document["paths"]
    for schema in document["components"]["schemas"].values():
        Draft202012Validator.check_schema(schema)
    for ref in set(refs(document)):
        assert pointer(document, ref) is not None, ref


def test_openapi_document_needs_no_credential(api: httpx.Client) -> None:
    assert api.get("/v1/openapi.json", headers=bearer("orb_wrong")).status_code == 200


def test_every_operation_documents_responses_and_a_permission(document: dict[str, Any]) -> None:
    for template, method, operation in operations(document):
        assert operation["summary"]
        assert operation["responses"]
        for status, response in operation["responses"].items():
            assert re.fullmatch(r"[1-5]\d\d", status), (template, status)
            assert "$ref" in response["content"]["application/json"]["schema"] or (
                template in DOCUMENTS
            )
        if template not in DOCUMENTS:
            assert operation["x-permission"] in {p.value for p in Permission}
            expected = ("401", "403") if (template, method) in SCOPE_WIDE else ("401", "403", "404")
            for status in expected:
                assert status in operation["responses"], (template, method, status)
        for parameter in operation.get("parameters", []):
            if parameter["in"] == "path":
                assert "{" + parameter["name"] + "}" in template
                assert parameter["required"] is True


# --- Routes and documented operations ---------------------------------------------------------


def test_every_route_is_documented(document: dict[str, Any]) -> None:
    routes = {
        "v1/" + str(pattern.pattern)
        for pattern in [*api_urls.urlpatterns, *events_urls.urlpatterns]
        if isinstance(pattern, URLPattern) and str(pattern.pattern) != "^.*$"
    }
    documented = {route_of(fill(template)) for template in document["paths"]}
    assert documented == routes
    # The catch-all route of task_resource multiplexes GetTask and the custom verbs.
    verbs = {t.rsplit(":", 1)[1] for t in document["paths"] if t.startswith("/v1/tasks/{task_id}:")}
    assert verbs == CUSTOM_VERBS
    assert "get" in document["paths"]["/v1/tasks/{task_id}"]


def test_every_documented_operation_exists(
    api: httpx.Client, document: dict[str, Any], world: dict[str, Any]
) -> None:
    token = world["tokens"]["admin"]
    for template, method, _ in operations(document):
        headers = {
            **bearer(token),
            "Content-Type": "application/json",
            "Idempotency-Key": new_key(),
        }
        response = api.request(method.upper(), fill(template), headers=headers, content=b"{}")
        assert response.status_code != 405, (template, method)
        if response.status_code == 404:
            assert response.json()["error"]["message"] != NO_SUCH_ENDPOINT, (template, method)


def test_undocumented_methods_and_paths_do_not_exist_E1(
    api: httpx.Client, document: dict[str, Any], world: dict[str, Any]
) -> None:
    token = world["tokens"]["admin"]
    for template, item in document["paths"].items():
        for method in set(METHODS) - set(item):
            response = api.request(method.upper(), fill(template), headers=bearer(token))
            assert response.status_code == 405, (template, method)
    for path in (
        f"/v1/tasks/{new_id()}:cancel",
        f"/v1/tasks/{new_id()}:Review",
        f"/v1/tasks/{new_id()}/events",
        "/v1/operations",
        "/v1/tasks/",
    ):
        response = api.get(path, headers=bearer(token))
        assert response.status_code == 404, path
        assert response.json()["error"]["message"] == NO_SUCH_ENDPOINT


def test_documented_query_parameters_are_exactly_the_accepted_ones_AU2(
    api: httpx.Client, document: dict[str, Any], world: dict[str, Any]
) -> None:
    token = world["tokens"]["admin"]
    task_id = world["tasks"]["failed"]
    audit_id = OperationAudit.objects.filter(task_id=task_id).values_list("id", flat=True)[0]
    for template, method, operation in operations(document):
        if method != "get" or template in DOCUMENTS:
            continue
        path = fill(template, task_id=task_id, audit_id=audit_id)
        for parameter in operation.get("parameters", []):
            if parameter["in"] != "query":
                continue
            response = api.get(path, params={parameter["name"]: "1"}, headers=bearer(token))
            if response.status_code == 400:
                message = response.json()["error"]["message"]
                assert not message.startswith("unknown query parameter"), (template, parameter)
        undocumented = api.get(path, params={"undocumented": "1"}, headers=bearer(token))
        assert undocumented.status_code == 400, template


# --- Real answers against the documented schemas ----------------------------------------------


def exchanges(api: httpx.Client, world: dict[str, Any]) -> list[tuple[str, str, httpx.Response]]:
    """Real responses of every endpoint: successes in each shape and the errors it can give."""
    tasks = world["tasks"]
    admin = world["tokens"]["admin"]
    reader = world["tokens"]["reader"]
    audit_only = issue(world, [Permission.AUDIT_READ])
    nobody = "orb_unknown-token"
    got: list[tuple[str, str, httpx.Response]] = []

    def get(template: str, token: str | None, params: Any = None, **ids: str) -> httpx.Response:
        headers = bearer(token) if token else {}
        response = api.get(fill(template, **ids), params=params, headers=headers)
        got.append((template, "get", response))
        return response

    def write(template: str, verb: str, task_id: str, token: str, body: Any, key: str) -> None:
        response = post(api, task_id, verb, token, body, key=key)
        got.append((template, "post", response))

    for document in DOCUMENTS:
        got.append((document, "get", api.get(document)))

    # Writes: success, replay, each error.
    review_t, retry_t = "/v1/tasks/{task_id}:review", "/v1/tasks/{task_id}:retry"
    key = new_key()
    write(review_t, "review", tasks["needs_review"], admin, review_body(), key)
    write(review_t, "review", tasks["needs_review"], admin, review_body(), key)  # replay
    write(review_t, "review", tasks["needs_review"], admin, review_body(reason="other"), key)
    write(review_t, "review", tasks["needs_review_2"], admin, review_body(revision="9"), new_key())
    write(review_t, "review", tasks["needs_review_2"], admin, {"reason": 1}, new_key())
    write(review_t, "review", tasks["needs_review_2"], nobody, review_body(), new_key())
    write(review_t, "review", tasks["needs_review_2"], reader, review_body(), new_key())
    write(review_t, "review", new_id(), admin, review_body(), new_key())
    key = new_key()
    write(retry_t, "retry", tasks["failed"], admin, retry_body(), key)
    write(retry_t, "retry", tasks["failed"], admin, retry_body(), key)  # replay
    write(retry_t, "retry", tasks["failed"], admin, retry_body(), new_key())  # successor exists
    write(retry_t, "retry", tasks["cancelled"], admin, retry_body(task_timeout_ms=0), new_key())
    write(retry_t, "retry", tasks["queue_full_failed"], admin, retry_body(), new_key())  # 429
    write(retry_t, "retry", tasks["cancelled"], nobody, retry_body(), new_key())
    write(retry_t, "retry", tasks["cancelled"], reader, retry_body(), new_key())
    write(retry_t, "retry", new_id(), admin, retry_body(), new_key())

    # Reads of every shape: leased, owned, with a result, a successor and its source.
    child_id = next(r for t, _, r in got if t == retry_t and r.status_code == 201).json()["data"][
        "task"
    ]["id"]
    planned = task_accept_for_plan(
        queue=Queue.objects.get(id=world["queue_id"]),
        actor_id=actor_id_for(world["namespace_id"], "scheduler"),
        plan_name="nightly",
        handler="object.prepare",
        payload=PAYLOAD,
    )
    task_t = "/v1/tasks/{task_id}"
    for task_id in [*tasks.values(), child_id, planned.id]:
        get(task_t, admin, task_id=task_id)
    get(task_t, admin, task_id="NOT-AN-ID")
    get(task_t, None, task_id=tasks["failed"])
    get(task_t, audit_only, task_id=tasks["failed"])
    get(task_t, world["tokens"]["other_queue"], task_id=tasks["failed"])

    credential_t = "/v1/credential"
    get(credential_t, admin)
    get(credential_t, world["tokens"]["other_queue"])
    get(credential_t, reader, {"limit": 1})
    get(credential_t, None)
    get(credential_t, audit_only)

    list_t = "/v1/tasks"
    get(list_t, reader, {"limit": 2})
    get(list_t, reader, {"limit": 100, "state": "FAILED,NEEDS_REVIEW"})
    get(list_t, reader, {"handler": "nobody"})
    get(list_t, reader, {"state": "nope"})
    get(list_t, reader, {"business_key_prefix": "object:", "error": "TIMEOUT", "limit": 1})
    get(
        list_t,
        reader,
        {"updated_after": "2026-01-01T00:00:00Z", "updated_before": "9998-01-01T00:00:00Z"},
    )
    get(list_t, reader, {"business_key": "object:failed", "business_key_prefix": "object:"})
    get(
        list_t,
        reader,
        {"updated_after": "2026-01-01T00:00:00Z", "updated_before": "2025-01-01T00:00:00Z"},
    )
    get(list_t, reader, {"updated_before": "2026-01-01"})
    get(list_t, None)
    get(list_t, audit_only)

    ops_t = "/v1/tasks/{task_id}/operations"
    get(ops_t, audit_only, {"limit": 1}, task_id=tasks["needs_review"])
    get(ops_t, audit_only, task_id=tasks["failed"])
    get(ops_t, audit_only, {"limit": 0}, task_id=tasks["failed"])
    get(ops_t, audit_only, {"cursor": "forged"}, task_id=tasks["failed"])
    get(ops_t, None, task_id=tasks["failed"])
    get(ops_t, reader, task_id=tasks["failed"])
    get(ops_t, audit_only, task_id=new_id())

    op_t = "/v1/tasks/{task_id}/operations/{audit_id}"
    for record in OperationAudit.objects.filter(task_id__in=[tasks["needs_review"], child_id]):
        get(op_t, audit_only, task_id=record.task_id, audit_id=record.id)
    retry_audit = OperationAudit.objects.get(task_id=tasks["failed"], action="task.retry")
    get(op_t, audit_only, task_id=tasks["failed"], audit_id=retry_audit.id)
    get(op_t, audit_only, task_id=tasks["failed"], audit_id="bad")
    get(op_t, audit_only, task_id=tasks["cancelled"], audit_id=retry_audit.id)
    get(op_t, None, task_id=tasks["failed"], audit_id=retry_audit.id)
    get(op_t, reader, task_id=tasks["failed"], audit_id=retry_audit.id)

    attempts_t = "/v1/tasks/{task_id}/attempts"
    for name in ("needs_review", "needs_review_leased", "failed", "succeeded", "cancelled"):
        get(attempts_t, reader, task_id=tasks[name])
    get(attempts_t, reader, {"limit": "x"}, task_id=tasks["failed"])
    get(attempts_t, None, task_id=tasks["failed"])
    get(attempts_t, audit_only, task_id=tasks["failed"])
    get(attempts_t, world["tokens"]["other_namespace"], task_id=tasks["failed"])

    # The event stream's subscriptions (docs/events.md).
    subscriber = world["tokens"]["subscriber"]

    def subscription(method: str, path: str, token: str | None, **kwargs: Any) -> httpx.Response:
        headers = {**(bearer(token) if token else {}), **kwargs.pop("headers", {})}
        response = api.request(method.upper(), path, headers=headers, **kwargs)
        template = "/v1/subscriptions" if path.count("/") == 2 else "/v1/subscriptions/{id}"
        template = template.replace("{id}", "{subscription_id}")
        got.append((template, method, response))
        return response

    def create(token: str | None, body: Any, key: str) -> httpx.Response:
        headers = {"Idempotency-Key": key, "Content-Type": "application/json"}
        content = body if isinstance(body, bytes) else json.dumps(body).encode()
        return subscription("post", "/v1/subscriptions", token, headers=headers, content=content)

    key = new_key()
    created = create(subscriber, {"name": "schema", "lease_ms": 5000}, key).json()["data"]
    create(subscriber, {"name": "schema", "lease_ms": 5000}, key)  # replay
    create(subscriber, {"name": "other"}, key)  # 409
    create(subscriber, {"name": "scoped", "queue_ids": [world["queue_id"]]}, new_key())
    create(subscriber, {"name": "x", "queue_ids": [new_id()]}, new_key())  # 400: no such queue
    create(subscriber, {"name": ""}, new_key())
    create(None, {"name": "x"}, new_key())
    create(reader, {"name": "x"}, new_key())
    listing = "/v1/subscriptions"
    subscription("get", listing, subscriber)
    subscription("get", listing, subscriber, params={"limit": 0})
    subscription("get", listing, None)
    subscription("get", listing, reader)
    one = f"/v1/subscriptions/{created['id']}"
    for method in ("get", "delete"):
        subscription(method, f"/v1/subscriptions/{new_id()}", subscriber)
        subscription(method, "/v1/subscriptions/NOT-AN-ID", subscriber)
        subscription(method, one, None)
        subscription(method, one, reader)
        subscription(method, one, subscriber)
    return got


def test_real_responses_match_the_documented_schemas(
    api: httpx.Client, document: dict[str, Any], world: dict[str, Any]
) -> None:
    got = exchanges(api, world)

    seen: dict[tuple[str, str], set[int]] = {}
    for template, method, response in got:
        assert response.headers["content-type"].startswith("application/json")
        schema = response_schema(document, template, method, response.status_code)
        errors = list(validator(document, schema).iter_errors(response.json()))
        assert not errors, (template, method, response.status_code, errors[0].message)
        seen.setdefault((template, method), set()).add(response.status_code)

    # Every documented operation was exercised, with success and the common errors.
    for template, method, operation in operations(document):
        statuses = seen[(template, method)]
        successes = {int(s) for s in operation["responses"] if s.startswith("2")}
        assert successes <= statuses, (template, method, statuses)
        if template not in DOCUMENTS:
            assert {400, 401, 403} <= statuses, (template, method, statuses)
    assert 404 in seen[("/v1/tasks/{task_id}", "get")]
    assert {409, 429} <= seen[("/v1/tasks/{task_id}:retry", "post")]
    assert 409 in seen[("/v1/tasks/{task_id}:review", "post")]
    assert 409 in seen[("/v1/subscriptions", "post")]
    assert 404 in seen[("/v1/subscriptions/{subscription_id}", "delete")]


def test_request_bodies_match_the_documented_schemas(document: dict[str, Any]) -> None:
    review_schema = validator(document, component("ReviewRequest"))
    retry_schema = validator(document, component("RetryRequest"))
    review_schema.validate(review_body())
    retry_schema.validate(retry_body())
    retry_schema.validate(retry_body(available_at=None, start_deadline_at="2030-01-01T00:00:00Z"))
    for bad in (
        review_body(Reason="x"),
        review_body(execution_settled=False),
        review_body(outcome="UNKNOWN"),
        review_body(result=None),
        review_body(revision="0"),
    ):
        assert not review_schema.is_valid(bad), bad
    for bad in (retry_body(safe_to_retry=False), retry_body(task_timeout_ms=0)):
        assert not retry_schema.is_valid(bad), bad


def test_schemas_are_strict_enough_to_catch_drift_RT9(
    api: httpx.Client, document: dict[str, Any], world: dict[str, Any]
) -> None:
    """The response schemas refuse extra members: a summary that grew ``retry_of`` fails."""
    page = api.get("/v1/tasks", headers=bearer(world["tokens"]["reader"])).json()
    page_schema = validator(document, response_schema(document, "/v1/tasks", "get", 200))
    page_schema.validate(page)

    leaky = copy.deepcopy(page)
    leaky["data"]["items"][0]["retry_of"] = new_id()
    with pytest.raises(ValidationError):
        page_schema.validate(leaky)

    task = api.get(
        f"/v1/tasks/{world['tasks']['failed']}", headers=bearer(world["tokens"]["reader"])
    ).json()
    task_schema = validator(document, response_schema(document, "/v1/tasks/{task_id}", "get", 200))
    task_schema.validate(task)
    for mutate in (
        lambda t: t["data"].update(revision=3),
        lambda t: t["data"].update(lease_id=new_id()),
        lambda t: t["data"].pop("state"),
        lambda t: t["data"].update(created_at="2026-01-01T00:00:00+08:00"),
    ):
        broken = copy.deepcopy(task)
        mutate(broken)
        assert not task_schema.is_valid(broken)


# --- The static rules in the document are the parsers' --------------------------------------


def test_the_documents_patterns_accept_exactly_what_the_parsers_accept_C5_C10_RT3() -> None:
    """A request valid by the document is refused only for a dynamic reason: each pattern is
    held against the parser it describes, on the edges and on samples."""
    import random
    import re
    import sys

    from orbit_console.ledger.api.openapi import REASON, _evidence_ref, _utc_time
    from orbit_console.ledger.api.openapi import REVISION as REVISION_SCHEMA
    from orbit_console.lib.recovery_rules import (
        MAX_REVISION,
        RuleError,
        check_evidence_ref,
        check_reason,
        check_revision,
    )
    from orbit_console.lib.rfc3339 import TimeFormatError, parse_utc

    def accepts(check: Any, value: str, error: type[Exception]) -> bool:
        try:
            check(value)
        except error:
            return False
        return True

    rng = random.Random(13)
    revision = re.compile(REVISION_SCHEMA["pattern"])
    numbers = [1, 9, 10, MAX_REVISION - 1, MAX_REVISION, MAX_REVISION + 1, 10**19, 10**20]
    numbers += [rng.randrange(1, 2**66) for _ in range(5000)]
    # "\u0661" is an Arabic-Indic one: a digit to str.isdigit, not to the API.
    texts = [str(n) for n in numbers] + ["0", "01", "+1", " 1", "1 ", "", "\u0661"]
    for text in texts:
        assert bool(revision.fullmatch(text)) == accepts(check_revision, text, RuleError), text

    time = re.compile(_utc_time())
    stamps = [
        f"{year:04d}-{month:02d}-{day:02d}T23:59:59Z"
        for year in (1999, 2000, 2023, 2024, 2100, 2400, 9996, 9998, 9999)
        for month in range(14)
        for day in range(33)
    ]
    stamps += ["2026-01-01T00:00:00.123456Z", "2026-01-01T00:00:00.1234567Z"]
    stamps += ["2026-01-01T24:00:00Z", "2026-01-01T00:00:60Z", "2026-01-01t00:00:00Z"]
    stamps += ["2026-01-01T00:00:00+00:00", "2026-01-01 00:00:00Z", ""]
    for stamp in stamps:
        assert bool(time.fullmatch(stamp)) == accepts(parse_utc, stamp, TimeFormatError), stamp

    evidence = re.compile(_evidence_ref()["pattern"])
    reason = re.compile(REASON["pattern"])
    for code in range(sys.maxunicode + 1):
        if 0xD800 <= code <= 0xDFFF:
            continue  # lone surrogates never reach the check: the JSON parser refuses them
        char = chr(code)
        accepted = accepts(check_evidence_ref, f"a{char}", RuleError)
        assert bool(evidence.fullmatch(f"a{char}")) == accepted, hex(code)
    for text in ["x", " x ", " ", "\t\n", "a\x00b", "\u3000", "\u3000x", "\x00"]:
        assert bool(reason.fullmatch(text)) == accepts(check_reason, text, RuleError), text


def test_the_task_lists_filter_rules_are_in_the_document(document: dict[str, Any]) -> None:
    """The new selection filters' static rules are the views' (lengths, NUL, times), and the
    rules between parameters are stated in x-constraints with the field their 400 names."""
    from orbit_console.ledger.api import views
    from orbit_console.ledger.api.openapi import _utc_time

    operation = document["paths"]["/v1/tasks"]["get"]
    schemas = {p["name"]: p["schema"] for p in operation["parameters"] if p["in"] == "query"}
    assert set(schemas) == views._TASK_LIST_PARAMS
    prefix, error = schemas["business_key_prefix"], schemas["error"]
    assert (prefix["minLength"], prefix["maxLength"]) == (1, views.MAX_BUSINESS_KEY_PREFIX_CHARS)
    assert (error["minLength"], error["maxLength"]) == (1, views.MAX_ERROR_FILTER_CHARS)
    for schema in (prefix, error):
        assert re.fullmatch(schema["pattern"], "100%_\\ é")
        assert not re.fullmatch(schema["pattern"], "a\x00b")
    assert (
        schemas["updated_after"]["pattern"] == schemas["updated_before"]["pattern"] == _utc_time()
    )
    assert {
        (c["rule"], tuple(c["parameters"]), c["field"]) for c in operation["x-constraints"]
    } == {
        ("not_together", ("business_key", "business_key_prefix"), "business_key_prefix"),
        ("earlier", ("updated_after", "updated_before"), "updated_after"),
    }
