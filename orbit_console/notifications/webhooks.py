"""Outgoing webhooks: endpoints of a namespace, the messages owed to them (written in the
notification's own transaction), and their delivery (docs/notifications.md).

Signing follows the Standard Webhooks specification through its library (PyPI
``standardwebhooks``): ``webhook-id`` (the message's id, the same on every attempt),
``webhook-timestamp`` and ``webhook-signature`` — one ``v1,`` signature per valid secret, two
while a rotation is under way.

Delivery: a message is claimed by one conditional update that also counts the attempt and sets
its next try past the request's longest possible time, so a worker killed mid-delivery leaves
it due again, under the same ``webhook-id``, once that time has passed. Only a 2xx answer
delivers; 410 disables the endpoint; any other answer or no answer is tried again with
exponential backoff and jitter (``Retry-After`` honoured) until ``CONSOLE_WEBHOOK_MAX_ATTEMPTS``,
then the message is failed, visibly, in the endpoint's log.
"""

import base64
import logging
import random
import secrets
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone
from standardwebhooks.webhooks import Webhook

from orbit_console.lib.ids import new_id
from orbit_console.lib.secretbox import seal, unseal
from orbit_console.notifications import ssrf
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

MAX_ANSWER_BYTES = 64 * 1024
# The longest ``Retry-After`` honoured: a receiver cannot park a message for longer.
MAX_RETRY_AFTER_SECONDS = 24 * 3600
USER_AGENT = "OrbitConsole-Webhooks/1"


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
    """Send a message again, under its own ``webhook-id`` (a receiver that had it drops it)."""
    with transaction.atomic():
        message = WebhookMessage.objects.select_for_update().get(id=message_id)
        message.state = MessageState.PENDING
        message.next_at = timezone.now()
        message.save(update_fields=["state", "next_at"])
    transaction.on_commit(_wake)
    return message


def _wake() -> None:
    from orbit_console.notifications import worker

    worker.wake()


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


# --- Delivery ---------------------------------------------------------------------------------


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


def timeout() -> httpx.Timeout:
    return httpx.Timeout(
        connect=settings.CONSOLE_WEBHOOK_CONNECT_TIMEOUT,
        read=settings.CONSOLE_WEBHOOK_TIMEOUT,
        write=settings.CONSOLE_WEBHOOK_TIMEOUT,
        pool=settings.CONSOLE_WEBHOOK_CONNECT_TIMEOUT,
    )


def lease() -> timedelta:
    """Longer than one attempt can take: a claimed message is due again after it."""
    return timedelta(
        seconds=settings.CONSOLE_WEBHOOK_CONNECT_TIMEOUT + 3 * settings.CONSOLE_WEBHOOK_TIMEOUT + 5
    )


def backoff(attempts: int) -> float:
    """Seconds before the next try after ``attempts`` tries: exponential, capped, with full
    jitter over its upper half so that a receiver back from an outage is not hit at once."""
    base = settings.CONSOLE_WEBHOOK_BACKOFF_SECONDS * (4 ** max(attempts - 1, 0))
    delay = min(base, settings.CONSOLE_WEBHOOK_BACKOFF_MAX_SECONDS)
    return delay * random.uniform(0.5, 1.0)  # noqa: S311 -- jitter, not a secret


def retry_after(value: str | None, now: datetime) -> float | None:
    """A ``Retry-After`` header in seconds (delta-seconds or an HTTP date), or ``None``."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max((when - now).total_seconds(), 0.0)


@dataclass(frozen=True)
class Answer:
    status: int | None
    retry_after: str | None = None
    error: str = ""


def due(now: datetime, *, limit: int = 100) -> list[WebhookMessage]:
    return list(
        WebhookMessage.objects.filter(
            state=MessageState.PENDING, next_at__lte=now, endpoint__active=True
        )
        .select_related("endpoint")
        .order_by("next_at", "created_at")[:limit]
    )


def claim(message: WebhookMessage, now: datetime) -> bool:
    """Take the message for one attempt: only one worker's update finds it as it was."""
    claimed = WebhookMessage.objects.filter(
        id=message.id, state=MessageState.PENDING, next_at=message.next_at
    ).update(attempts=F("attempts") + 1, next_at=now + lease())
    if claimed:
        message.attempts += 1
    return bool(claimed)


def send(client: httpx.Client, message: WebhookMessage, now: datetime) -> Answer:
    endpoint = message.endpoint
    try:
        ssrf.check_url(endpoint.url)
    except ssrf.Forbidden as error:
        return Answer(None, error=str(error))
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        **signature_headers(endpoint, message.id, now, message.body),
    }
    try:
        with client.stream(
            "POST", endpoint.url, content=message.body.encode(), headers=headers
        ) as response:
            read = 0
            for chunk in response.iter_bytes():
                read += len(chunk)
                if read > MAX_ANSWER_BYTES:
                    break
            return Answer(response.status_code, response.headers.get("retry-after"))
    except httpx.HTTPError as error:
        return Answer(None, error=f"{type(error).__name__}: {error}"[:200])


def record(message: WebhookMessage, answer: Answer, now: datetime) -> None:
    fields: dict[str, object] = {"response_code": answer.status, "last_error": answer.error}
    if answer.status is not None and 200 <= answer.status < 300:
        fields |= {"state": MessageState.DELIVERED, "delivered_at": now, "next_at": None}
    elif answer.status == 410:
        fields |= {"state": MessageState.FAILED, "next_at": None, "last_error": "410 Gone"}
    elif message.attempts >= settings.CONSOLE_WEBHOOK_MAX_ATTEMPTS:
        fields |= {"state": MessageState.FAILED, "next_at": None}
    else:
        wait = backoff(message.attempts)
        hinted = retry_after(answer.retry_after, now)
        if hinted is not None:
            wait = max(wait, min(hinted, MAX_RETRY_AFTER_SECONDS))
        fields["next_at"] = now + timedelta(seconds=wait)
    with transaction.atomic():
        WebhookMessage.objects.filter(id=message.id).update(**fields)
    if answer.status == 410:
        endpoint_disable(endpoint_id=message.endpoint_id, reason="the receiver answered 410 Gone")


def deliver_due(client: httpx.Client, *, now: datetime | None = None) -> int:
    """One pass: every due message once. Returns how many were tried."""
    tried = 0
    for message in due(now or timezone.now()):
        at = timezone.now()
        if not claim(message, at):
            continue
        answer = send(client, message, at)
        record(message, answer, timezone.now())
        tried += 1
    return tried


def new_client() -> httpx.Client:
    return httpx.Client(timeout=timeout(), follow_redirects=False, trust_env=False)
