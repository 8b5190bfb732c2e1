"""The webhook payloads' JSON Schemas (docs/notifications.md) and their place in the OpenAPI
document (``webhooks``), registered with the ledger's document when the app is ready."""

from typing import Any

from orbit_console.notifications.kinds import KINDS

ID = {"type": "string", "pattern": "^[0-9a-f]{32}$"}
TEXT = {"type": "string", "maxLength": 2000}


def _duration(what: str) -> dict[str, Any]:
    """A duration as ``manage.py console objective`` takes and shows it (lib/durations.py)."""
    return {"type": "string", "maxLength": 20, "description": f"{what}, as set: 30m, 4h, 1h30m"}


FACTS = {
    "type": "object",
    "description": "Plain facts: states, counts, the reason; never a body or a business key.",
    "properties": {
        "action": {"enum": ["review", "retry"]},
        "state": {"type": "string", "maxLength": 20},
        "expires_at": {"type": "string", "format": "date-time"},
        "by": {"type": "string", "maxLength": 150},
        "by_company": {"type": "boolean", "description": "company sign-in made by's account"},
        "reason": TEXT,
        "evidence": {"type": "string", "maxLength": 200},
        "evidence_link": {"type": "string", "maxLength": 1000},
        "items": {"type": "integer", "minimum": 0},
        "counts": {"type": "object", "additionalProperties": {"type": "integer", "minimum": 0}},
        "minutes": {"type": "integer", "minimum": 0},
        "ran_at": {"type": "string", "format": "date-time"},
        "problems": {"type": "integer", "minimum": 0},
        "first_break": {"type": "string", "maxLength": 200},
        "last_checkpoint_at": {"type": "string", "format": "date-time"},
        "number": {"type": "integer", "minimum": 0},
        "handler": {"type": "string", "maxLength": 200},
        "waiting_since": {"type": "string", "format": "date-time"},
        "deadline": {"type": "string", "format": "date-time"},
        "objective": _duration("the waiting-time objective"),
        "waiting": {"type": "integer", "minimum": 0},
        "stalled_since": {"type": "string", "format": "date-time"},
        "last_decision_at": {"type": "string", "format": "date-time"},
        "stall_after": _duration("the stall alarm"),
    },
    "additionalProperties": False,
}

PLAIN = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": "orbit.notification.v1",
    "title": "Orbit Console notification (plain JSON webhook payload)",
    "type": "object",
    "required": ["type", "timestamp", "schema", "data"],
    "properties": {
        "type": {"enum": sorted(KINDS)},
        "timestamp": {"type": "string", "format": "date-time"},
        "schema": {"const": "orbit.notification.v1"},
        "data": {
            "type": "object",
            "required": ["notification_id", "namespace_id", "title", "lines", "link", "facts"],
            "properties": {
                "notification_id": ID,
                "namespace_id": {"type": "string", "maxLength": 64},
                "task_id": {"type": "string", "maxLength": 64},
                "proposal_id": ID,
                "batch_id": ID,
                "submission_id": ID,
                "title": TEXT,
                "lines": {"type": "array", "items": TEXT, "maxItems": 30},
                "link": {"type": "string", "maxLength": 500},
                "facts": FACTS,
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}

SLACK = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "Orbit Console notification (Slack-compatible webhook payload)",
    "type": "object",
    "required": ["text", "blocks"],
    "properties": {
        "text": TEXT,
        "blocks": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "required": ["type"],
                "properties": {"type": {"enum": ["section", "context"]}},
            },
        },
    },
    "additionalProperties": False,
}

HEADER = {"in": "header", "required": True, "schema": {"type": "string"}}


def openapi_webhooks() -> tuple[dict[str, Any], dict[str, Any]]:
    """The notification webhook as OpenAPI 3.1 ``webhooks``, and its two payload schemas."""
    schemas = {
        "NotificationPayload": {k: v for k, v in PLAIN.items() if k not in ("$schema", "$id")},
        "SlackNotificationPayload": {k: v for k, v in SLACK.items() if k != "$schema"},
    }
    operation = {
        "post": {
            "summary": "A notification of the console (docs/notifications.md)",
            "description": (
                "Sent to each endpoint of a namespace that wants the event type, signed per "
                "the Standard Webhooks specification. Only a 2xx answer delivers; 410 "
                "disables the endpoint; anything else is tried again with backoff, the same "
                "webhook-id each time."
            ),
            "security": [],
            "parameters": [
                {
                    "name": "webhook-id",
                    "description": "Unique per notification and endpoint: deduplicate on it",
                    **HEADER,
                },
                {"name": "webhook-timestamp", "description": "Unix seconds", **HEADER},
                {
                    "name": "webhook-signature",
                    "description": "v1,<base64 HMAC-SHA256>, "
                    "space-separated: two during a secret rotation",
                    **HEADER,
                },
            ],
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {
                        "schema": {
                            "oneOf": [
                                {"$ref": "#/components/schemas/NotificationPayload"},
                                {"$ref": "#/components/schemas/SlackNotificationPayload"},
                            ]
                        }
                    }
                },
            },
            "responses": {
                "2XX": {"description": "Delivered"},
                "410": {"description": "Gone: the endpoint is disabled"},
                "429": {"description": "Tried again after Retry-After (or the backoff)"},
            },
        }
    }
    return {"orbitNotification": operation}, schemas
