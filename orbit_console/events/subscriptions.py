"""Subscriptions: created, read, listed and deleted by their owner (docs/events.md).

A subscription belongs to the credential that creates it, in that credential's namespace, and
covers either the whole namespace or some of its queues. A credential sees (and streams) a
subscription only when it owns it and the subscription's scope lies within its own (C4's rule:
anything else is 404, as if it did not exist); a credential limited to some queues can only
subscribe to some of those. A credential, and a namespace, hold at most
``ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_CREDENTIAL`` and ``..._PER_NAMESPACE`` subscriptions:
each one costs a row per event written in its scope.
"""

from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone

from orbit_console.events.deliveries import stream_group
from orbit_console.events.models import Delivery, Subscription
from orbit_console.ledger.auth import queue_scope
from orbit_console.ledger.errors import (
    IdempotencyConflict,
    InvalidArgument,
    NotFound,
    SubscriptionLimit,
)
from orbit_console.ledger.models import Credential, Namespace, Queue
from orbit_console.ledger.requests import body_digest, body_members, invalid_field, string_field
from orbit_console.ledger.services import key_digest
from orbit_console.lib.ids import is_id
from orbit_console.lib.live import publish_on_commit
from orbit_console.lib.numbers import NotAnInteger, OutOfRange, integer_in
from orbit_console.lib.rfc3339 import format_utc

MAX_NAME_CHARS = 200
MAX_QUEUES = 50
LEASE_MS = (1_000, 600_000)
DEFAULT_LEASE_MS = 30_000
GONE_MESSAGE = "events.gone"


@dataclass(frozen=True, slots=True)
class SubscriptionRequest:
    name: str
    queue_ids: tuple[str, ...]
    lease_ms: int
    digest: str


def parse_subscription(body: bytes) -> SubscriptionRequest:
    """The body of ``POST /v1/subscriptions``: ``name``, optional ``queue_ids`` and
    ``lease_ms``; every static rule (C6)."""
    members = body_members(body, allowed={"name", "queue_ids", "lease_ms"}, required={"name"})
    name = string_field("name", members["name"].value)
    if not name.strip() or len(name) > MAX_NAME_CHARS or "\x00" in name:
        raise invalid_field("name", f"must be 1 to {MAX_NAME_CHARS} characters, not blank")
    queue_ids: tuple[str, ...] = ()
    if "queue_ids" in members:
        value = members["queue_ids"].value
        if not isinstance(value, list) or not value or len(value) > MAX_QUEUES:
            raise invalid_field("queue_ids", f"must be a list of 1 to {MAX_QUEUES} queue ids")
        if not all(isinstance(item, str) and is_id(item) for item in value):
            raise invalid_field("queue_ids", "every item must be a 32-hex queue id")
        if len(set(value)) != len(value):
            raise invalid_field("queue_ids", "must not repeat a queue")
        queue_ids = tuple(sorted(value))
    lease_ms = DEFAULT_LEASE_MS
    if "lease_ms" in members:
        # An integer as JSON Schema has it: 5000, or 5000.0 (the document says "integer").
        try:
            lease_ms = integer_in(members["lease_ms"].value, *LEASE_MS)
        except NotAnInteger:
            raise invalid_field("lease_ms", "must be an integer number of milliseconds") from None
        except OutOfRange:
            raise invalid_field(
                "lease_ms", f"must be from {LEASE_MS[0]} to {LEASE_MS[1]}"
            ) from None
    return SubscriptionRequest(name, queue_ids, lease_ms, body_digest(members))


def _owned(credential: Credential) -> Q:
    """The subscriptions ``credential`` owns: its own, and those made before owners were kept
    by its actor (events migration 0002)."""
    return Q(credential_id=credential.id) | Q(credential_id="", actor_id=credential.actor_id)


def owned_by(credential: Credential, subscription: Subscription) -> bool:
    if subscription.credential_id:
        return subscription.credential_id == credential.id
    return subscription.actor_id == credential.actor_id


def within_scope(credential: Credential, subscription: Subscription) -> bool:
    """The credential owns the subscription, and the subscription's queues are within the
    credential's (checked on every call: C3)."""
    if subscription.namespace_id != credential.namespace_id or not owned_by(
        credential, subscription
    ):
        return False
    scope = queue_scope(credential)
    return scope is None or (bool(subscription.queues) and subscription.queues <= scope)


def subscription_in_scope(credential: Credential, subscription_id: str) -> Subscription:
    subscription = Subscription.objects.filter(id=subscription_id).first()
    if subscription is None or not within_scope(credential, subscription):
        raise NotFound("no such subscription")
    return subscription


def subscriptions_in_scope(credential: Credential, *, limit: int) -> list[Subscription]:
    found = Subscription.objects.filter(
        _owned(credential), namespace_id=credential.namespace_id
    ).order_by("-created_at", "-id")
    # A credential limited to some queues may own subscriptions outside its scope now (its
    # scope narrowed since): those are skipped, as on every other call.
    return [s for s in found[: limit * 4] if within_scope(credential, s)][:limit]


def subscription_create(
    *, credential: Credential, idempotency_key: str, request: SubscriptionRequest
) -> tuple[int, Subscription]:
    """201 and a new subscription, or 200 and the one this credential created with this key
    before (C7's rule for the same key with another body: 409 ``IDEMPOTENCY_CONFLICT``); 429
    ``SUBSCRIPTION_LIMIT`` when the credential or its namespace holds as many as it may (after
    the replay: O3)."""
    digest = key_digest(idempotency_key)
    for _ in range(2):
        try:
            with transaction.atomic():
                lock_namespace(credential.namespace_id)
                earlier = Subscription.objects.filter(
                    _owned(credential), namespace_id=credential.namespace_id, key_digest=digest
                ).first()
                if earlier is not None:
                    if earlier.request_digest != request.digest:
                        raise IdempotencyConflict(
                            "this Idempotency-Key created a subscription with another body"
                        )
                    if not within_scope(credential, earlier):
                        raise NotFound("no such subscription")
                    return 200, earlier
                _check_queues(credential, request.queue_ids)
                _check_room(credential)
                return 201, subscription_insert(
                    namespace_id=credential.namespace_id,
                    credential_id=credential.id,
                    request=request,
                    actor_id=credential.actor_id,
                    key_digest=digest,
                )
        except IntegrityError:
            continue  # a racer with the same key won: answer from what it stored
    raise IntegrityError("the subscription's idempotency record could not be read back")


def lock_namespace(namespace_id: str) -> None:
    """Serialise the counting writes of one namespace (subscriptions, open streams) until the
    transaction ends: two at once could each count one below a limit and both insert. A row
    lock on MariaDB; SQLite's IMMEDIATE transactions serialise every writer already."""
    list(Namespace.objects.select_for_update().filter(id=namespace_id).values_list("id"))


def _check_room(credential: Credential) -> None:
    mine = Subscription.objects.filter(credential_id=credential.id).count()
    most = settings.ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_CREDENTIAL
    if mine >= most:
        raise SubscriptionLimit(
            f"this credential has {mine} subscriptions, the most one credential may have "
            f"({most}): delete one first"
        )
    theirs = Subscription.objects.filter(namespace_id=credential.namespace_id).count()
    most = settings.ORBIT_EVENTS_MAX_SUBSCRIPTIONS_PER_NAMESPACE
    if theirs >= most:
        raise SubscriptionLimit(
            f"the namespace has {theirs} subscriptions, the most one namespace may have "
            f"({most}): delete one first"
        )


def subscription_insert(
    *,
    namespace_id: str,
    credential_id: str,
    request: SubscriptionRequest,
    actor_id: str,
    key_digest: str,
) -> Subscription:
    """Store a subscription whose queues were checked (over the API, against the caller's
    scope; by ``manage.py events subscribe``, against the namespace and the owner's scope)."""
    with transaction.atomic():
        return Subscription.objects.create(
            namespace_id=namespace_id,
            credential_id=credential_id,
            name=request.name,
            queue_ids=" ".join(request.queue_ids),
            lease_ms=request.lease_ms,
            actor_id=actor_id,
            created_at=timezone.now(),
            key_digest=key_digest,
            request_digest=request.digest,
        )


def _check_queues(credential: Credential, queue_ids: tuple[str, ...]) -> None:
    scope = queue_scope(credential)
    if not queue_ids:
        if scope is not None:
            raise invalid_field(
                "queue_ids", "the credential is limited to some queues: name them (or some)"
            )
        return
    known = set(
        Queue.objects.filter(namespace_id=credential.namespace_id, id__in=queue_ids).values_list(
            "id", flat=True
        )
    )
    for queue_id in queue_ids:
        if queue_id not in known or (scope is not None and queue_id not in scope):
            raise InvalidArgument(f"queue_ids: no queue {queue_id} in scope", field="queue_ids")


@transaction.atomic
def subscription_delete(*, credential: Credential, subscription_id: str) -> Subscription:
    """Delete the subscription and everything it is owed; its open streams close."""
    subscription = subscription_in_scope(credential, subscription_id)
    Delivery.objects.filter(subscription_id=subscription.id).delete()
    subscription.delete()
    publish_on_commit(
        stream_group(subscription.namespace_id),
        {"type": GONE_MESSAGE, "subscription_id": subscription_id},
    )
    return subscription


def subscription_detail(subscription: Subscription, counts: dict[str, int]) -> dict[str, Any]:
    return {
        "id": subscription.id,
        "namespace_id": subscription.namespace_id,
        "name": subscription.name,
        "queue_ids": sorted(subscription.queues),
        "lease_ms": subscription.lease_ms,
        "created_at": format_utc(subscription.created_at),
        "backlog": counts["backlog"],
        "in_flight": counts["in_flight"],
    }
