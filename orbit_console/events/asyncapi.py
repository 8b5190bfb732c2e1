"""The AsyncAPI 3.0 document of the event stream, served at ``/v1/asyncapi.json`` beside the
OpenAPI document of the HTTP endpoints (AsyncAPI is the convention for event APIs, as OpenAPI
is for HTTP ones).

It describes this server: the frames it sends (``action: send``) and those it receives
(``action: receive``) on one channel per subscription. ``tests/events/test_asyncapi.py`` keeps
it true: the document is valid AsyncAPI 3.0, and every frame a real stream sends or takes
validates against its message here.
"""

import functools
from typing import Any

from django.conf import settings
from django.http import HttpRequest, JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_GET

from orbit_console.events import stream
from orbit_console.ledger.api.openapi import ID, STATE, TIME
from orbit_console.ledger.journal import TASK_ACCEPTED, TASK_COMPLETED, TASK_NEEDS_REVIEW
from orbit_console.ledger.services import ACCEPTED, CANCELLED, EXECUTION_RESULT, REVIEW
from orbit_console.lib.strictjson import MAX_DEPTH

EVENT_TYPES = [TASK_ACCEPTED, TASK_NEEDS_REVIEW, TASK_COMPLETED]
OPERATIONS = [ACCEPTED, EXECUTION_RESULT, CANCELLED, REVIEW]
DECIMAL = {"type": "string", "pattern": "^[1-9][0-9]*$"}
PROOF = {"type": "string", "minLength": 1, "maxLength": 200}


def _frame(kind: str, required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict:
    properties = {"type": {"const": kind}, **required, **(optional or {})}
    return {
        "type": "object",
        "required": ["type", *required],
        "properties": properties,
        "additionalProperties": False,
    }


EVENT = {
    "type": "object",
    "required": [
        "id",
        "sequence",
        "type",
        "namespace_id",
        "queue_id",
        "task_id",
        "state",
        "revision",
        "operation",
        "audit_id",
        "occurred_at",
    ],
    "properties": {
        "id": {**ID, "description": "The event's id: record it to handle the event once"},
        "sequence": {**DECIMAL, "description": "The order the events were written in"},
        "type": {"enum": EVENT_TYPES},
        "namespace_id": ID,
        "queue_id": ID,
        "task_id": ID,
        "state": {**STATE, "description": "The task's state at this event"},
        "revision": {**DECIMAL, "description": "The task's revision at this event"},
        "operation": {
            "enum": OPERATIONS,
            "description": "The audit action of the operation that caused it: a manual review "
            "is a task.completed whose operation is task.review, a manual retry the "
            "successor's task.accepted, with retry_of",
        },
        "audit_id": {
            **ID,
            "description": "The audit record, on this task, of the operation that caused it: "
            "GET /v1/tasks/{task_id}/operations/{audit_id}",
        },
        "occurred_at": TIME,
        "retry_of": {**ID, "description": "task.accepted of a retry successor: the source"},
        "retry_audit_id": {
            **ID,
            "description": "task.accepted of a retry successor: the retry's audit record "
            "(task.retry), on the source",
        },
    },
    "additionalProperties": False,
}

SERVER_FRAMES: dict[str, dict[str, Any]] = {
    "welcome": _frame(
        "welcome",
        {
            "subscription_id": ID,
            "capacity": {"type": "integer", "minimum": 1, "maximum": stream.CAPACITY[1]},
            "lease_ms": {"type": "integer", "minimum": 1},
            "heartbeat_ms": {"type": "integer", "minimum": 1},
            "server_time": TIME,
        },
    ),
    "event": _frame(
        "event",
        {
            "delivery": {
                "type": "object",
                "required": ["proof", "attempt", "leased_until"],
                "properties": {
                    "proof": PROOF,
                    "attempt": {"type": "integer", "minimum": 1},
                    "leased_until": TIME,
                },
                "additionalProperties": False,
            },
            "event": EVENT,
        },
    ),
    "acked": _frame("acked", {"proof": PROOF, "owed": {"type": "boolean"}}),
    "pong": _frame("pong", {}),
    "error": _frame("error", {"code": {"type": "string"}, "message": {"type": "string"}}),
}
CLIENT_FRAMES: dict[str, dict[str, Any]] = {
    "ping": _frame("ping", {}),
    "ack": _frame("ack", {"proof": PROOF}),
    "resume": _frame(
        "resume",
        {"proofs": {"type": "array", "items": PROOF, "maxItems": stream.MAX_RESUME}},
    ),
}

SUMMARIES = {
    "welcome": "First frame of an open stream: its capacity, lease and heartbeat",
    "event": "One event, handed under a lease: ack its proof once your transaction committed",
    "acked": "The acknowledgement was stored (owed: false when it was owed no more already)",
    "pong": "The answer to a ping",
    "error": "Why the stream is about to close (the close code says it too)",
    "ping": "The client's heartbeat, at least every heartbeat_ms",
    "ack": "The event of this delivery is handled and its effect committed",
    "resume": "On a new connection: the proofs of deliveries the client held and did not "
    "finish; they are handed to it again at once instead of after their lease",
}


@functools.cache
def document() -> dict[str, Any]:
    messages = {
        name: {"name": name, "summary": SUMMARIES[name], "payload": schema}
        for name, schema in {**SERVER_FRAMES, **CLIENT_FRAMES}.items()
    }
    channel = "#/channels/events"
    operations = {
        f"send{name.title()}": {
            "action": "send",
            "channel": {"$ref": channel},
            "summary": SUMMARIES[name],
            "messages": [{"$ref": f"{channel}/messages/{name}"}],
        }
        for name in SERVER_FRAMES
    } | {
        f"receive{name.title()}": {
            "action": "receive",
            "channel": {"$ref": channel},
            "summary": SUMMARIES[name],
            "messages": [{"$ref": f"{channel}/messages/{name}"}],
        }
        for name in CLIENT_FRAMES
    }
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Orbit event stream (orbit.events.v1)",
            "version": "1",
            "description": (
                "Task events of one subscription, at least once, each under a lease. Open the "
                f"WebSocket with the subprotocol {stream.SUBPROTOCOL}, an allowed Origin "
                "(scheme, host and port) and the bearer token of the credential that owns the "
                "subscription, holding events:subscribe; ping at least every heartbeat_ms; "
                "ack each event's proof after your own transaction committed; on a new "
                "connection, resume with the proofs you held. An event only prompts a re-read "
                "of the task and its audit. A refused handshake answers the API's error "
                "envelope: 403 the Origin or the permission, 401 the token, 400 the "
                "subprotocol or the query, 404 the subscription, 429 STREAM_LIMIT (the "
                f"credential has {settings.ORBIT_EVENTS_MAX_STREAMS_PER_CREDENTIAL} streams "
                f"open, or its namespace {settings.ORBIT_EVENTS_MAX_STREAMS_PER_NAMESPACE}). "
                f"Frames are JSON text of at most {stream.MAX_FRAME_CHARS} characters, nested "
                f"at most {MAX_DEPTH} deep, with exactly the members described here. Close "
                "codes: 4400 a malformed frame, 4401 the "
                "token is no longer valid, 4403 it lost events:subscribe, 4404 the "
                "subscription is gone, 4408 no heartbeat, 4429 the stream could not keep its "
                "place among the open ones, 4503 the stream failed (reconnect). "
                "Subscriptions are managed over HTTP: /v1/openapi.json. See docs/events.md."
            ),
        },
        "defaultContentType": "application/json",
        "channels": {
            "events": {
                "address": "/v1/subscriptions/{subscription_id}/events",
                "parameters": {
                    "subscription_id": {"description": "The subscription: 32 lowercase hex"}
                },
                "messages": messages,
                "bindings": {
                    "ws": {
                        "method": "GET",
                        "query": {
                            "type": "object",
                            "properties": {
                                "capacity": {
                                    "type": "integer",
                                    "minimum": stream.CAPACITY[0],
                                    "maximum": stream.CAPACITY[1],
                                    "default": stream.DEFAULT_CAPACITY,
                                    "description": "Unacknowledged events the stream may "
                                    "hold out to this connection at once",
                                }
                            },
                            "additionalProperties": False,
                        },
                        "headers": {
                            "type": "object",
                            "required": ["Authorization", "Origin", "Sec-WebSocket-Protocol"],
                            "properties": {
                                "Authorization": {"type": "string", "pattern": "^Bearer "},
                                "Origin": {"type": "string"},
                                "Sec-WebSocket-Protocol": {"const": stream.SUBPROTOCOL},
                            },
                        },
                    }
                },
            }
        },
        "operations": operations,
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
    }


@csrf_exempt  # a token-less GET-only document, as /v1/openapi.json
@require_GET
def asyncapi_document(request: HttpRequest) -> JsonResponse:
    """The document, with this deployment as its server."""
    server = {
        "host": request.get_host(),
        "protocol": "wss" if request.is_secure() else "ws",
        "security": [{"$ref": "#/components/securitySchemes/bearer"}],
    }
    return JsonResponse({**document(), "servers": {"orbit": server}})
