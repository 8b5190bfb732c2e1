"""``/v1/subscriptions``: create, list, read and delete the event stream's subscriptions
(docs/events.md), with the recovery API's edge (``ledger/api/http.py``: authentication,
permission, the error envelope) and described in its OpenAPI document."""

from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from orbit_console.events import subscriptions
from orbit_console.events.deliveries import backlog
from orbit_console.ledger.api import openapi
from orbit_console.ledger.api.http import (
    Answer,
    api_endpoint,
    limit_param,
    path_id,
    query,
    write_request,
)
from orbit_console.ledger.models import Credential, Permission


@csrf_exempt
def subscription_collection(request: HttpRequest) -> HttpResponse:
    """``/v1/subscriptions``: GET lists, POST creates."""
    if request.method == "POST":
        return create_subscription(request)
    return list_subscriptions(request)


@csrf_exempt
def subscription_resource(request: HttpRequest, subscription_id: str) -> HttpResponse:
    """``/v1/subscriptions/{id}``: GET reads, DELETE deletes."""
    if request.method == "DELETE":
        return delete_subscription(request, subscription_id=subscription_id)
    return get_subscription(request, subscription_id=subscription_id)


@api_endpoint(method="POST", permission=Permission.SUBSCRIBE)
def create_subscription(request: HttpRequest, credential: Credential) -> Answer:
    key, body = write_request(request)
    status, subscription = subscriptions.subscription_create(
        credential=credential,
        idempotency_key=key,
        request=subscriptions.parse_subscription(body),
    )
    return status, _detail(subscription)


@api_endpoint(method="GET", permission=Permission.SUBSCRIBE)
def list_subscriptions(request: HttpRequest, credential: Credential) -> Answer:
    limit = limit_param(query(request, allowed={"limit"}), default=100)
    found = subscriptions.subscriptions_in_scope(credential, limit=limit)
    return 200, {"items": [_detail(subscription) for subscription in found]}


@api_endpoint(method="GET", permission=Permission.SUBSCRIBE)
def get_subscription(
    request: HttpRequest, credential: Credential, *, subscription_id: str
) -> Answer:
    query(request, allowed=set())
    subscription_id = path_id(subscription_id, "subscription_id")
    return 200, _detail(subscriptions.subscription_in_scope(credential, subscription_id))


@api_endpoint(method="DELETE", permission=Permission.SUBSCRIBE)
def delete_subscription(
    request: HttpRequest, credential: Credential, *, subscription_id: str
) -> Answer:
    query(request, allowed=set())
    subscription_id = path_id(subscription_id, "subscription_id")
    subscriptions.subscription_delete(credential=credential, subscription_id=subscription_id)
    return 200, {"id": subscription_id, "deleted": True}


def _detail(subscription: subscriptions.Subscription) -> dict[str, Any]:
    counts = backlog(subscription, now=timezone.now())
    return subscriptions.subscription_detail(subscription, counts)


# --- The OpenAPI document's part --------------------------------------------------------------


def openapi_paths() -> tuple[dict[str, Any], dict[str, Any]]:
    """The subscription endpoints and their schemas, for ``/v1/openapi.json``."""
    subscription_id = openapi.parameter("subscription_id", "path", openapi.ID)
    errors = openapi.errors(400, 401, 403, 404, 503)
    schemas = {
        "SubscriptionRequest": openapi.object_schema(
            {"name": {"type": "string", "minLength": 1, "maxLength": subscriptions.MAX_NAME_CHARS}},
            {
                "queue_ids": {
                    "type": "array",
                    "items": openapi.ID,
                    "minItems": 1,
                    "maxItems": subscriptions.MAX_QUEUES,
                    "uniqueItems": True,
                    "description": "Only these queues' events (default: the whole namespace; "
                    "required of a credential limited to some queues)",
                },
                "lease_ms": {
                    "type": "integer",
                    "minimum": subscriptions.LEASE_MS[0],
                    "maximum": subscriptions.LEASE_MS[1],
                    "description": "How long a consumer holds a delivery before it is "
                    f"handed out again (default {subscriptions.DEFAULT_LEASE_MS})",
                },
            },
        ),
        "Subscription": openapi.object_schema(
            {
                "id": openapi.ID,
                "namespace_id": openapi.ID,
                "name": {"type": "string"},
                "queue_ids": {"type": "array", "items": openapi.ID},
                "lease_ms": {"type": "integer"},
                "created_at": openapi.TIME,
                "backlog": {"type": "integer", "minimum": 0},
                "in_flight": {"type": "integer", "minimum": 0},
            }
        ),
        "SubscriptionResponse": openapi.envelope(openapi.ref("Subscription")),
        "SubscriptionList": openapi.envelope(
            openapi.object_schema(
                {"items": {"type": "array", "items": openapi.ref("Subscription")}}
            )
        ),
        "SubscriptionDeleted": openapi.envelope(
            openapi.object_schema({"id": openapi.ID, "deleted": {"const": True}})
        ),
    }
    paths = {
        "/v1/asyncapi.json": {
            "get": {
                "summary": "The event stream's frames: its AsyncAPI 3.0 document (no credential "
                "needed)",
                "security": [],
                "responses": {
                    "200": {
                        "description": "The AsyncAPI 3.0 document",
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "required": ["asyncapi", "info", "channels"],
                                }
                            }
                        },
                    }
                },
            }
        },
        "/v1/subscriptions": {
            "get": {
                "summary": "The credential's own event subscriptions within its scope, newest "
                "first",
                "x-permission": Permission.SUBSCRIBE,
                "parameters": [openapi.LIMIT],
                "responses": {
                    "200": openapi.response("SubscriptionList", "The subscriptions"),
                    **openapi.errors(400, 401, 403, 503),
                },
            },
            "post": {
                "summary": "Subscribe to the namespace's task events, or some queues' "
                "(stream them at /v1/subscriptions/{subscription_id}/events: /v1/asyncapi.json)",
                "x-permission": Permission.SUBSCRIBE,
                "parameters": [openapi.IDEMPOTENCY_KEY],
                "requestBody": {
                    "required": True,
                    "content": {"application/json": {"schema": openapi.ref("SubscriptionRequest")}},
                },
                "responses": {
                    "201": openapi.response("SubscriptionResponse", "Created"),
                    "200": openapi.response(
                        "SubscriptionResponse", "Created before with this Idempotency-Key"
                    ),
                    **openapi.errors(400, 401, 403, 404, 409, 503),
                    "429": openapi.response(
                        "Error",
                        "SUBSCRIPTION_LIMIT: the credential holds "
                        f"{settings.ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_CREDENTIAL} subscriptions, "
                        "or its namespace "
                        f"{settings.ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_NAMESPACE}: delete one "
                        "first",
                    ),
                },
            },
        },
        "/v1/subscriptions/{subscription_id}": {
            "get": {
                "summary": "One subscription, with how many events it is owed",
                "x-permission": Permission.SUBSCRIBE,
                "parameters": [subscription_id],
                "responses": {
                    "200": openapi.response("SubscriptionResponse", "The subscription"),
                    **errors,
                },
            },
            "delete": {
                "summary": "Delete a subscription and what it is owed; its streams close",
                "x-permission": Permission.SUBSCRIBE,
                "parameters": [subscription_id],
                "responses": {
                    "200": openapi.response("SubscriptionDeleted", "Deleted"),
                    **errors,
                },
            },
        },
    }
    return paths, schemas
