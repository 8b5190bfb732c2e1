"""The OpenAPI 3.1 document of every /v1 endpoint, served at /v1/openapi.json.

tests/ledger/test_openapi.py keeps it true: every route is documented, every documented
operation exists, and real responses validate against the schemas below.
"""

import functools
import sys
import unicodedata
from collections.abc import Callable
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from orbit_console.ledger.models import TaskState
from orbit_console.ledger.selectors import TASK_ORDERS
from orbit_console.lib.recovery_rules import (
    MAX_EVIDENCE_REF_CHARS,
    MAX_REASON_CHARS,
    MAX_REVISION,
    MAX_TASK_TIMEOUT_MS,
)
from orbit_console.lib.rfc3339 import MAX_YEAR, MIN_YEAR

# --- Patterns -----------------------------------------------------------------------------------
# Every static rule of the API is in the document, so that a request valid by the document is
# refused only for a dynamic reason (the task, the clock, a cursor this server did not issue):
# bench/fuzz_api.py and tests/ledger/test_fuzz.py hold the document to that.


def _decimal_at_most(limit: int) -> str:
    """A pattern of the decimal strings 1..``limit`` without leading zeros (C5)."""
    digits = str(limit)
    shorter = f"[1-9][0-9]{{0,{len(digits) - 2}}}"
    same_length = []
    for index, digit in enumerate(digits):
        low = "1" if index == 0 else "0"
        if int(digit) > int(low):
            rest = len(digits) - index - 1
            same_length.append(f"{digits[:index]}[{low}-{int(digit) - 1}][0-9]{{{rest}}}")
    same_length.append(digits)
    return "^(" + "|".join([shorter, *same_length]) + ")$"


def _refused_characters() -> str:
    """A character class of what ``evidence_ref`` refuses (C10): whitespace, control and
    format characters. (Lone surrogates never reach it: the body's JSON must be valid Unicode,
    as its description says.)"""
    refused = [
        code
        for code in range(sys.maxunicode + 1)
        if chr(code).isspace() or unicodedata.category(chr(code)) in ("Cc", "Cf")
    ]
    ranges: list[tuple[int, int]] = []
    for code in refused:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1] = (ranges[-1][0], code)
        else:
            ranges.append((code, code))
    # The characters themselves (none is special in a class): every regex dialect reads them.
    return "".join(chr(a) if a == b else f"{chr(a)}-{chr(b)}" for a, b in ranges)


def _utc_time() -> str:
    """RT3: exactly what ``lib.rfc3339.parse_utc`` takes — UTC with Z, at most six fraction
    digits, years MIN_YEAR..MAX_YEAR, and only days that exist (29 February of leap years)."""
    assert (MIN_YEAR, MAX_YEAR) == (2000, 9998)  # noqa: S101 -- the year patterns below
    year = "(2[0-9]{3}|[3-8][0-9]{3}|9[0-8][0-9]{2}|99[0-8][0-9]|999[0-8])"
    leap_year = "([2-9][0-9](0[48]|[2468][048]|[13579][26])|([2468][048]|[3579][26])00)"
    day = (
        "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
        "|02-(0[1-9]|1[0-9]|2[0-8]))"
    )
    time = "T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?Z"
    return f"^({year}-{day}|{leap_year}-02-29){time}$"


ID = {"type": "string", "pattern": "^[0-9a-f]{32}$"}
TIME = {"type": "string", "format": "date-time", "pattern": "Z$"}
TIME_INPUT = {"type": ["string", "null"], "pattern": _utc_time()}
UPDATED_TIME = {"type": "string", "pattern": _utc_time()}
REVISION = {"type": "string", "pattern": _decimal_at_most(MAX_REVISION)}
REASON = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_REASON_CHARS,
    "pattern": "^[^\\u0000]*[^\\s\\u0000][^\\u0000]*$",  # not blank, no NUL
}


def _evidence_ref() -> dict[str, Any]:
    return {
        "type": "string",
        "minLength": 1,
        "maxLength": MAX_EVIDENCE_REF_CHARS,
        "pattern": f"^[^{_refused_characters()}]*$",
    }


STATES = "|".join(TaskState.values)
TEXT_FILTER = {"type": "string", "minLength": 1, "maxLength": 512}
NO_NUL = "^[^\\u0000]*$"
BUSINESS_KEY_PREFIX = {"type": "string", "minLength": 1, "maxLength": 255, "pattern": NO_NUL}
ERROR_FILTER = {"type": "string", "minLength": 1, "maxLength": 200, "pattern": NO_NUL}
STATE = {
    "type": "string",
    "enum": ["WAITING", "RUNNING", "NEEDS_REVIEW", "SUCCEEDED", "FAILED", "CANCELLED"],
}


def ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def object_schema(
    required: dict[str, Any], optional: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "type": "object",
        "required": list(required),
        "properties": {**required, **(optional or {})},
        "additionalProperties": False,
    }


def envelope(data: dict[str, Any]) -> dict[str, Any]:
    return object_schema({"request_id": ID, "data": data})


def _page(item: str) -> dict[str, Any]:
    return object_schema(
        {"items": {"type": "array", "items": ref(item)}}, {"next_cursor": {"type": "string"}}
    )


def _schemas() -> dict[str, Any]:
    # What every recovery decision carries (C5, C10), review or retry.
    decision = {"expected_revision": REVISION, "reason": REASON, "evidence_ref": _evidence_ref()}
    return {
        "Error": object_schema(
            {
                "request_id": ID,
                "error": {
                    "type": "object",
                    "required": ["code", "message"],
                    "properties": {
                        "code": {
                            "type": "string",
                            "enum": [
                                "INVALID_ARGUMENT",
                                "UNAUTHENTICATED",
                                "PERMISSION_DENIED",
                                "NOT_FOUND",
                                "METHOD_NOT_ALLOWED",
                                "STATE_CONFLICT",
                                "IDEMPOTENCY_CONFLICT",
                                "QUEUE_FULL",
                                "APPLICATION_FULL",
                                "SUBSCRIPTION_LIMIT",
                                "STREAM_LIMIT",
                                "UNAVAILABLE",
                            ],
                        },
                        "message": {"type": "string"},
                        "field": {
                            "type": "string",
                            "description": "The request part at fault (400).",
                        },
                        "retry_after_ms": {"type": "integer", "minimum": 1},
                        "allow": {"type": "string"},
                    },
                    "additionalProperties": False,
                },
            }
        ),
        "RetryPolicy": object_schema(
            {
                "max_attempts": {"type": "integer"},
                "initial_delay_ms": {"type": "integer"},
                "max_delay_ms": {"type": "integer"},
                "attempt_timeout_ms": {"type": "integer"},
            }
        ),
        "Owner": {
            "oneOf": [
                object_schema({"kind": {"const": "NONE"}}),
                object_schema({"kind": {"const": "PLAN"}, "plan_id": ID, "trigger_id": ID}),
                object_schema({"kind": {"const": "WORKFLOW"}, "workflow_id": ID}),
            ]
        },
        "TaskDetail": object_schema(
            {
                "id": ID,
                "namespace_id": ID,
                "queue_id": ID,
                "state": STATE,
                "revision": REVISION,
                "handler": {"type": "string"},
                "handler_version": {"type": "string"},
                "payload_version": {"type": "string"},
                "payload": {"description": "The payload JSON exactly as accepted."},
                "available_at": TIME,
                "deadline_at": TIME,
                "recovery_safety": {"type": "string"},
                "retry": ref("RetryPolicy"),
                "attempt_count": {"type": "integer", "minimum": 0},
                "created_at": TIME,
                "updated_at": TIME,
                "effect_uncertain": {"type": "boolean"},
                "owner": ref("Owner"),
                "gated": {"type": "boolean"},
                "leased": {"type": "boolean"},
                "active_attempt": {"type": "boolean"},
                "unreleased_permit": {"type": "boolean"},
            },
            {
                "business_key": {"type": "string"},
                "concurrency_key": {"type": "string"},
                "priority": {"type": "integer"},
                "start_deadline_at": TIME,
                "result": {"description": "The result JSON exactly as declared; never null."},
                "completed_at": TIME,
                "retry_of": ID,
                "lease_expires_at": TIME,
                "retry_successor_id": ID,
            },
        ),
        "TaskSummary": object_schema(
            {
                "id": ID,
                "namespace_id": ID,
                "queue_id": ID,
                "state": STATE,
                "revision": REVISION,
                "handler": {"type": "string"},
                "handler_version": {"type": "string"},
                "attempt_count": {"type": "integer"},
                "effect_uncertain": {"type": "boolean"},
                "created_at": TIME,
                "updated_at": TIME,
            },
            {"business_key": {"type": "string"}, "completed_at": TIME},
        ),
        "Operation": object_schema(
            {
                "id": ID,
                "task_id": ID,
                "operation_id": ID,
                "actor_id": ID,
                "action": {"type": "string"},
                "created_at": TIME,
            }
        ),
        "OperationDetail": object_schema(
            {
                "id": ID,
                "task_id": ID,
                "operation_id": ID,
                "actor_id": ID,
                "action": {"type": "string"},
                "created_at": TIME,
                "reason": {"type": "string"},
                "before": {"type": ["object", "null"]},
                "after": {"type": "object"},
            },
            {"evidence_ref": {"type": "string"}},
        ),
        "LateReport": object_schema(
            {
                "id": ID,
                "outcome": {"type": "string", "enum": ["SUCCEEDED", "FAILED", "UNKNOWN"]},
                "detail": {"type": "string"},
                "received_at": TIME,
            }
        ),
        "Attempt": object_schema(
            {
                "id": ID,
                "task_id": ID,
                "number": {"type": "integer", "minimum": 1},
                "worker_id": {"type": "string"},
                "started_at": TIME,
                "outcome": {
                    "type": ["string", "null"],
                    "enum": ["SUCCEEDED", "FAILED", "UNKNOWN", None],
                },
                "late_reports": {"type": "array", "items": ref("LateReport")},
            },
            {"ended_at": TIME, "error": {"type": "string"}},
        ),
        "ReviewRequest": object_schema(
            {
                **decision,
                "execution_settled": {"const": True},
                "outcome": {"type": "string", "enum": ["SUCCEEDED", "FAILED"]},
                "result": {"not": {"type": "null"}, "description": "At most 256 KiB of JSON text."},
            }
        ),
        "RetryRequest": object_schema(
            {
                **decision,
                "safe_to_retry": {"const": True},
                "task_timeout_ms": {
                    "type": "integer",
                    "minimum": 1,
                    "maximum": MAX_TASK_TIMEOUT_MS,
                },
            },
            {
                "available_at": TIME_INPUT,
                "start_deadline_at": TIME_INPUT,
            },
        ),
        "ReviewReceipt": envelope(
            object_schema(
                {"task": ref("TaskDetail"), "audit_id": ID, "deduplicated": {"type": "boolean"}}
            )
        ),
        "RetryReceipt": envelope(
            object_schema(
                {
                    "source_task_id": ID,
                    "task": ref("TaskDetail"),
                    "audit_id": ID,
                    "deduplicated": {"type": "boolean"},
                }
            )
        ),
        "Credential": object_schema(
            {
                "id": ID,
                "actor_id": ID,
                "actor_name": {"type": "string", "minLength": 1},
                "namespace_id": ID,
                "namespace_name": {"type": "string", "minLength": 1},
                "queue_ids": {
                    "type": "array",
                    "items": ID,
                    "description": "Empty: the whole namespace.",
                },
                "permissions": {"type": "array", "items": {"type": "string"}},
            },
            {"expires_at": {"type": "string", "format": "date-time"}},
        ),
        "CredentialResponse": envelope(ref("Credential")),
        "TaskResponse": envelope(ref("TaskDetail")),
        "TaskPage": envelope(
            object_schema(
                {"items": {"type": "array", "items": ref("TaskSummary")}},
                {
                    "next_cursor": {"type": "string"},
                    "prev_cursor": {"type": "string"},
                    "total": {"type": "integer", "minimum": 0},
                    "total_exact": {"type": "boolean"},
                },
            )
        ),
        "OperationPage": envelope(_page("Operation")),
        "OperationResponse": envelope(ref("OperationDetail")),
        "AttemptPage": envelope(_page("Attempt")),
    }


def response(schema: str, description: str) -> dict[str, Any]:
    return {"description": description, "content": {"application/json": {"schema": ref(schema)}}}


def errors(*statuses: int) -> dict[str, Any]:
    meanings = {
        400: "INVALID_ARGUMENT: nothing was changed",
        401: "UNAUTHENTICATED",
        403: "PERMISSION_DENIED",
        404: "NOT_FOUND, also outside the credential's scope",
        409: "STATE_CONFLICT or IDEMPOTENCY_CONFLICT",
        429: "QUEUE_FULL or APPLICATION_FULL: send the same request again later",
        503: "UNAVAILABLE: may have been applied; resend the same request",
    }
    return {str(status): response("Error", meanings[status]) for status in statuses}


def parameter(
    name: str, where: str, schema: dict[str, Any], required: bool = True
) -> dict[str, Any]:
    return {"name": name, "in": where, "required": required, "schema": schema}


def _described(item: dict[str, Any], description: str) -> dict[str, Any]:
    return {**item, "description": description}


# Rules between query parameters, which a parameter's schema cannot state; each refusal names
# ``field`` (tests/ledger/test_fuzz.py holds refusals of generated requests to them).
TASK_LIST_CONSTRAINTS = [
    {
        "rule": "not_together",
        "parameters": ["business_key", "business_key_prefix"],
        "field": "business_key_prefix",
        "description": "business_key and business_key_prefix cannot both be given.",
    },
    {
        "rule": "earlier",
        "parameters": ["updated_after", "updated_before"],
        "field": "updated_after",
        "description": "updated_after must be earlier than updated_before.",
    },
]

TASK_ID = parameter("task_id", "path", ID)
AUDIT_ID = parameter("audit_id", "path", ID)
LIMIT = parameter("limit", "query", {"type": "integer", "minimum": 1, "maximum": 100}, False)
CURSOR = parameter("cursor", "query", {"type": "string", "minLength": 1, "maxLength": 1024}, False)
IDEMPOTENCY_KEY = parameter(
    "Idempotency-Key", "header", {"type": "string", "pattern": "^[\\x21-\\x7e]{1,255}$"}
)
READ_ERRORS = errors(400, 401, 403, 404, 503)
WRITE_ERRORS = errors(400, 401, 403, 404, 409, 503)


def _write(summary: str, request: str, permission: str, ok: dict[str, Any]) -> dict[str, Any]:
    return {
        "post": {
            "summary": summary,
            "x-permission": permission,
            "parameters": [TASK_ID, IDEMPOTENCY_KEY],
            "requestBody": {
                "required": True,
                "description": (
                    "At most 512 KiB of UTF-8 JSON (C6): no duplicate keys, no lone surrogates "
                    "(\\ud800), numbers kept exactly as written."
                ),
                "content": {"application/json": {"schema": ref(request)}},
            },
            "responses": {**ok, **WRITE_ERRORS},
        }
    }


def _paths() -> dict[str, Any]:
    return {
        "/v1/openapi.json": {
            "get": {
                "summary": "This document (no credential needed)",
                "security": [],
                "responses": {
                    "200": {
                        "description": "The OpenAPI 3.1 document",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["openapi", "info", "paths"],
                                }
                            }
                        },
                    }
                },
            }
        },
        "/v1/credential": {
            "get": {
                "summary": "The presented token's own credential: namespace, queues, permissions",
                "x-permission": "tasks:read",
                "responses": {
                    "200": response("CredentialResponse", "The credential"),
                    **errors(400, 401, 403, 503),
                },
            }
        },
        "/v1/tasks": {
            "get": {
                "summary": "List tasks (summaries, newest first or in order; never retry_of)",
                "x-permission": "tasks:read",
                "parameters": [
                    parameter(
                        "state",
                        "query",
                        {"type": "string", "pattern": f"^({STATES})(,({STATES}))*$"},
                        False,
                    ),
                    parameter("queue_id", "query", ID, False),
                    parameter("handler", "query", TEXT_FILTER, False),
                    parameter("business_key", "query", TEXT_FILTER, False),
                    _described(
                        parameter("business_key_prefix", "query", BUSINESS_KEY_PREFIX, False),
                        "Tasks whose business_key starts with this text, exactly: case, "
                        "accents and spaces count, and %, _ and \\ are plain characters. Not "
                        "with business_key.",
                    ),
                    _described(
                        parameter("updated_after", "query", UPDATED_TIME, False),
                        "Tasks updated at or after this time (updated_at >= it); earlier "
                        "than updated_before when both are given.",
                    ),
                    _described(
                        parameter("updated_before", "query", UPDATED_TIME, False),
                        "Tasks updated before this time (updated_at < it).",
                    ),
                    _described(
                        parameter("error", "query", ERROR_FILTER, False),
                        "Tasks with at least one attempt whose error contains this text; "
                        "the letters A-Z match in either case, every other character "
                        "exactly (%, _ and \\ are plain characters). Late reports are not read.",
                    ),
                    _described(
                        parameter(
                            "order",
                            "query",
                            {"type": "string", "enum": list(TASK_ORDERS)},
                            False,
                        ),
                        "By creation or last update, newest or oldest first (ties by id); "
                        "created_desc by default. A cursor belongs to its order.",
                    ),
                    _described(
                        parameter(
                            "count", "query", {"type": "string", "enum": ["true", "false"]}, False
                        ),
                        "true: the page carries total, the tasks matching, counted up to a "
                        "cap (ORBIT_TASK_COUNT_CAP, 10000 by default); past it total is the "
                        "cap and total_exact false.",
                    ),
                    LIMIT,
                    _described(
                        CURSOR,
                        "next_cursor reads on; prev_cursor (on a page reached by a cursor) "
                        "reads back, to the first page at most.",
                    ),
                ],
                "x-constraints": TASK_LIST_CONSTRAINTS,
                "responses": {"200": response("TaskPage", "A page of tasks"), **READ_ERRORS},
            }
        },
        "/v1/tasks/{task_id}": {
            "get": {
                "summary": "GetTask: the task detail with retry_of and recovery facts",
                "x-permission": "tasks:read",
                "parameters": [TASK_ID],
                "responses": {"200": response("TaskResponse", "The task"), **READ_ERRORS},
            }
        },
        "/v1/tasks/{task_id}:review": _write(
            "Review a NEEDS_REVIEW task (RV)",
            "ReviewRequest",
            "tasks:review",
            {"200": response("ReviewReceipt", "Reviewed, or the replayed receipt")},
        ),
        "/v1/tasks/{task_id}:retry": _write(
            "Retry a FAILED or CANCELLED task as a new linked task (RT)",
            "RetryRequest",
            "tasks:retry",
            {
                "201": response("RetryReceipt", "The successor was created"),
                "200": response("RetryReceipt", "The replayed receipt"),
                **errors(429),
            },
        ),
        "/v1/tasks/{task_id}/operations": {
            "get": {
                "summary": "The task's operation audit, newest first (AU2-AU4)",
                "x-permission": "tasks:audit:read",
                "parameters": [TASK_ID, LIMIT, CURSOR],
                "responses": {
                    "200": response("OperationPage", "A page of operations"),
                    **READ_ERRORS,
                },
            }
        },
        "/v1/tasks/{task_id}/operations/{audit_id}": {
            "get": {
                "summary": "One operation with reason, evidence, before and after (AU5)",
                "x-permission": "tasks:audit:read",
                "parameters": [TASK_ID, AUDIT_ID],
                "responses": {
                    "200": response("OperationResponse", "The operation"),
                    **READ_ERRORS,
                },
            }
        },
        "/v1/tasks/{task_id}/attempts": {
            "get": {
                "summary": "The task's executions, newest first, with late reports",
                "x-permission": "tasks:read",
                "parameters": [TASK_ID, LIMIT, CURSOR],
                "responses": {"200": response("AttemptPage", "A page of attempts"), **READ_ERRORS},
            }
        },
    }


# Endpoints other apps serve under /v1 describe themselves here when they are ready (the event
# stream's subscriptions, orbit_console/events), so that the ledger does not import them: each
# gives its paths and the schemas they refer to.
Extension = Callable[[], tuple[dict[str, Any], dict[str, Any]]]
_extensions: list[Extension] = []


def document_paths(extension: Extension) -> None:
    if extension not in _extensions:
        _extensions.append(extension)
        document.cache_clear()


# Outgoing requests other apps make (the console's notification webhooks): OpenAPI 3.1's
# ``webhooks``, given the same way (named operations, and the schemas they refer to).
_webhooks: list[Extension] = []


def document_webhooks(extension: Extension) -> None:
    if extension not in _webhooks:
        _webhooks.append(extension)
        document.cache_clear()


@functools.cache
def document() -> dict[str, Any]:
    """Built once, on first use: the evidence_ref pattern is computed from the Unicode
    database (a quarter of a second), which no process should pay at start."""
    paths, schemas = _paths(), _schemas()
    for extension in _extensions:
        more_paths, more_schemas = extension()
        paths.update(more_paths)
        schemas.update(more_schemas)
    webhooks: dict[str, Any] = {}
    for extension in _webhooks:
        more_hooks, more_schemas = extension()
        webhooks.update(more_hooks)
        schemas.update(more_schemas)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Orbit recovery API (embedded ledger)",
            "version": "1",
            "description": (
                "Manual review, manual retry, the task operation audit and the subscriptions "
                "of the event stream (its frames: /v1/asyncapi.json). See docs/api.md and "
                "docs/events.md."
            ),
        },
        "components": {
            "schemas": schemas,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": paths,
        **({"webhooks": webhooks} if webhooks else {}),
    }


@csrf_exempt  # a token-less GET-only document: other methods answer 405, not a CSRF page
@require_GET
def openapi_document(request: HttpRequest) -> JsonResponse:
    """The document itself; its request id travels in the X-Request-Id header."""
    return JsonResponse(document())
