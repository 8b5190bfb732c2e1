"""Outgoing webhooks: endpoints of a namespace, the messages owed to them (written in the
notification's own transaction) and how each is signed (docs/notifications.md). Sending them
is ``delivery.py``'s, run by the worker (``worker.py``).

Signing follows the Standard Webhooks specification through its library (PyPI
``standardwebhooks``): ``webhook-id`` (the message's id, the same on every attempt),
``webhook-timestamp`` and ``webhook-signature`` — one ``v1,`` signature per valid secret, two
while a rotation is under way.
"""

import base64
import logging
import secrets
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from orbit_console.lib.ids import new_id
from orbit_console.lib.secretbox import seal, unseal
from orbit_console.notifications import ssrf, wakeup
from orbit_console.notifications.kinds import KINDS
from orbit_console.notifications.models import (
    Endpoint,
    EndpointFormat,
    MessageState,
    Notification,
    WebhookMessage,
)
from orbit_console.notifications.payloads import body_for

logger = logging.getLogger("orbit.notifications.webhooks")

MAX_URL_LENGTH = Endpoint._meta.get_field("url").max_length or 500


class EndpointRefused(Exception):
    """The endpoint cannot be saved as asked; the message says why."""


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


# --- Endpoints -----------------------------------------------------------------------------------


def _clean_kinds(event_types: list[str]) -> str:
    unknown = sorted(set(event_types) - set(KINDS))
    if unknown:
        raise EndpointRefused(f"unknown event types: {', '.join(unknown)}")
    return " ".join(sorted(set(event_types)))


def endpoint_add(
    *,
    namespace_id: str,
    url: str,
    event_types: list[str],
    fmt: str = EndpointFormat.JSON,
    language: str = "",
) -> tuple[Endpoint, str]:
    """A new endpoint and its signing secret (shown once; stored sealed)."""
    if len(url) > MAX_URL_LENGTH:
        raise EndpointRefused(f"a webhook URL has at most {MAX_URL_LENGTH} characters")
    try:
        ssrf.check_url(url)
    except ssrf.Forbidden as error:
        raise EndpointRefused(str(error)) from error
    if fmt not in EndpointFormat.values:
        raise EndpointRefused(f"unknown format: {fmt}")
    secret = new_secret()
    endpoint = Endpoint.objects.create(
        namespace_id=namespace_id,
        url=url,
        event_types=_clean_kinds(event_types),
        format=fmt,
        language=language or settings.LANGUAGE_CODE,
        secret_sealed=seal(secret),
        created_at=timezone.now(),
    )
    return endpoint, secret


def endpoint_rotate(*, endpoint_id: str) -> str:
    """A new secret signs from now on; the current one keeps signing beside it until
    ``endpoint_end_rotation``, so receivers can switch without losing a message."""
    with transaction.atomic():
        endpoint = Endpoint.objects.select_for_update().get(id=endpoint_id)
        secret = new_secret()
        endpoint.previous_secret_sealed = endpoint.secret_sealed
        endpoint.secret_sealed = seal(secret)
        endpoint.save(update_fields=["previous_secret_sealed", "secret_sealed"])
    return secret


def endpoint_end_rotation(*, endpoint_id: str) -> None:
    Endpoint.objects.filter(id=endpoint_id).update(previous_secret_sealed="")


def endpoint_enable(*, endpoint_id: str) -> None:
    Endpoint.objects.filter(id=endpoint_id).update(active=True, disabled_reason="")


def endpoint_disable(*, endpoint_id: str, reason: str) -> None:
    """Disable the endpoint; what it was still owed fails, visibly (replay sends it again)."""
    now = timezone.now()
    with transaction.atomic():
        Endpoint.objects.filter(id=endpoint_id).update(active=False, disabled_reason=reason[:200])
        WebhookMessage.objects.filter(endpoint_id=endpoint_id, state=MessageState.PENDING).update(
            state=MessageState.FAILED, next_at=None, last_error=f"endpoint disabled: {reason}"[:200]
        )
    logger.warning("webhook endpoint %s disabled: %s", endpoint_id, reason, extra={"at": now})


def replay(*, message_id: str) -> WebhookMessage:
    """Send a message again, under its own ``webhook-id`` (a receiver that had it drops it).
    ``WebhookMessage.DoesNotExist`` for an unknown id."""
    with transaction.atomic():
        message = WebhookMessage.objects.select_for_update().get(id=message_id)
        message.state = MessageState.PENDING
        message.next_at = timezone.now()
        message.save(update_fields=["state", "next_at"])
        wakeup.wake_on_commit()
    return message


# --- What each notification owes ------------------------------------------------------------------


def enqueue(notification: Notification) -> int:
    """One message for every active endpoint that wants the notification: those of its
    namespace (audit notifications, which belong to no namespace, go to the endpoints that name
    their kind). Part of the notification's transaction."""
    endpoints = Endpoint.objects.filter(active=True)
    if notification.namespace_id:
        endpoints = endpoints.filter(namespace_id=notification.namespace_id)
    owed = [
        WebhookMessage(
            id=f"msg_{new_id()}",
            endpoint=endpoint,
            notification=notification,
            body=body_for(endpoint, notification),
            created_at=notification.created_at,
            next_at=notification.created_at,
        )
        for endpoint in endpoints
        if (
            endpoint.wants(notification.kind)
            if notification.namespace_id
            else notification.kind in endpoint.kinds
        )
    ]
    WebhookMessage.objects.bulk_create(owed)
    return len(owed)


# --- Signing ----------------------------------------------------------------------------------


def signature_headers(
    endpoint: Endpoint, message_id: str, at: datetime, body: str
) -> dict[str, str]:
    secrets_ = [endpoint.secret_sealed]
    if endpoint.previous_secret_sealed:
        secrets_.append(endpoint.previous_secret_sealed)
    signatures = [Webhook(unseal(sealed)).sign(message_id, at, body) for sealed in secrets_]
    return {
        "webhook-id": message_id,
        "webhook-timestamp": str(int(at.timestamp())),
        "webhook-signature": " ".join(signatures),
    }
