"""One webhook attempt from claim to record (docs/notifications.md, "Delivery and retries").

- **Claim.** A due message is taken by one conditional update that counts the attempt and
  moves its next try past the attempt's lease; the try is written to the delivery log in the
  same transaction. A worker killed mid-attempt leaves the message due again once the lease
  has run out, under the same ``webhook-id``.
- **Attempt.** Resolving and judging the host (``ssrf.py``), connecting, sending and reading
  the whole answer share one wall-clock deadline, ``CONSOLE_WEBHOOK_TIMEOUT``: a receiver that
  drips its answer or never answers is cut off at it. The lease is longer than the deadline, so
  no attempt outlives its claim.
- **Record.** Only a 2xx answer delivers; a redirect fails the message at once (redirects are
  never followed: the endpoint must be given its final URL); 410 disables the endpoint; any
  other answer or none is tried again with exponential backoff and jitter (``Retry-After``
  honoured) until ``CONSOLE_WEBHOOK_MAX_ATTEMPTS``, then the message fails, visibly. The
  record is fenced by the attempt's number: an attempt whose claim was taken over (its lease
  ran out) writes its try to the log and changes nothing else.
"""

import asyncio
import logging
import random
import ssl
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from email.utils import parsedate_to_datetime
from functools import cache

import httpx
from django.conf import settings
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from orbit_console.notifications import ssrf
from orbit_console.notifications.models import DeliveryAttempt, MessageState, WebhookMessage
from orbit_console.notifications.webhooks import endpoint_disable, signature_headers

logger = logging.getLogger("orbit.notifications.delivery")

MAX_ANSWER_BYTES = 64 * 1024
# The longest ``Retry-After`` honoured: a receiver cannot park a message for longer.
MAX_RETRY_AFTER_SECONDS = 24 * 3600
# What a claim's lease adds to the attempt's deadline: time to record the answer.
LEASE_MARGIN_SECONDS = 5
# Due messages read at a time while filling the free slots.
DUE_ROWS = 100
USER_AGENT = "OrbitConsole-Webhooks/1"


def deadline() -> float:
    """Seconds one attempt may take, all of it: resolving, connecting, sending, the answer."""
    return float(settings.CONSOLE_WEBHOOK_TIMEOUT)


def lease() -> timedelta:
    """Longer than one attempt can take: a claimed message is due again after it."""
    return timedelta(seconds=deadline() + LEASE_MARGIN_SECONDS)


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
    if value.isascii() and value.isdigit():
        return float(value[:9])  # more digits would only be capped to MAX_RETRY_AFTER_SECONDS
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        return None
    return max((when - now).total_seconds(), 0.0)


@cache
def _tls() -> ssl.SSLContext:
    """httpx's TLS settings (certifi's roots), made once: making them costs ~0.1 s."""
    return httpx.create_ssl_context()


def new_client() -> httpx.AsyncClient:
    """The worker's one client: no redirects followed, no proxy from the environment, a
    connection for every attempt that may be in flight."""
    connect = min(float(settings.CONSOLE_WEBHOOK_CONNECT_TIMEOUT), deadline())
    slots = settings.CONSOLE_WEBHOOK_CONCURRENCY
    return httpx.AsyncClient(
        verify=_tls(),
        timeout=httpx.Timeout(deadline(), connect=connect),
        limits=httpx.Limits(max_connections=slots, max_keepalive_connections=slots),
        follow_redirects=False,
        trust_env=False,
    )


@dataclass(frozen=True)
class Outgoing:
    """A claimed message, signed for its attempt: all the attempt needs, no database."""

    message_id: str
    endpoint_id: str
    url: str
    body: bytes
    headers: dict[str, str]
    number: int


@dataclass(frozen=True)
class Answer:
    status: int | None
    retry_after: str | None = None
    location: str | None = None
    error: str = ""


# --- Claims -------------------------------------------------------------------------------------


def due(
    now: datetime,
    *,
    limit: int = DUE_ROWS,
    endpoint_id: str | None = None,
    skip_endpoints: Collection[str] = (),
    skip_messages: Collection[str] = (),
) -> list[WebhookMessage]:
    """The oldest due messages of active endpoints (leases that ran out included), of one
    endpoint with ``endpoint_id`` (an index of its own finds them, however long the queue)."""
    found = WebhookMessage.objects.filter(
        state=MessageState.PENDING, next_at__lte=now, endpoint__active=True
    )
    if endpoint_id is not None:
        found = found.filter(endpoint_id=endpoint_id)
    if skip_endpoints:
        found = found.exclude(endpoint_id__in=list(skip_endpoints))
    if skip_messages:
        found = found.exclude(id__in=list(skip_messages))
    return list(found.select_related("endpoint").order_by("next_at", "created_at")[:limit])


def claim(message: WebhookMessage, at: datetime) -> bool:
    """Take the message for one attempt: only one worker's update finds it as it was. The try
    is logged in the same transaction."""
    with transaction.atomic():
        claimed = WebhookMessage.objects.filter(
            id=message.id, state=MessageState.PENDING, next_at=message.next_at
        ).update(attempts=F("attempts") + 1, next_at=at + lease())
        if claimed:
            message.attempts += 1
            DeliveryAttempt.objects.create(message=message, number=message.attempts, started_at=at)
    return bool(claimed)


def outgoing(message: WebhookMessage, at: datetime) -> Outgoing:
    headers = {
        "content-type": "application/json",
        "user-agent": USER_AGENT,
        **signature_headers(message.endpoint, message.id, at, message.body),
    }
    return Outgoing(
        message_id=message.id,
        endpoint_id=message.endpoint_id,
        url=message.endpoint.url,
        body=message.body.encode(),
        headers=headers,
        number=message.attempts,
    )


@dataclass
class Claims:
    """What ``claim_due`` took, and the endpoints it left at their limit: more of theirs may
    be due."""

    outs: list[Outgoing]
    limited: set[str]


def claim_due(
    now: datetime,
    *,
    slots: int,
    in_flight: Mapping[str, int],
    skip_messages: Collection[str] = (),
    endpoint_id: str | None = None,
) -> Claims:
    """Claim up to ``slots`` due messages, oldest first, at most
    ``CONSOLE_WEBHOOK_ENDPOINT_CONCURRENCY`` per endpoint counting ``in_flight`` (attempts
    already under way, by endpoint): an endpoint with a backlog takes its few, and the others'
    messages are found behind it. Only those of ``endpoint_id`` when it is given (one of its
    attempts ended: the worker fills that endpoint's slots and looks no further)."""
    per_endpoint = settings.CONSOLE_WEBHOOK_ENDPOINT_CONCURRENCY
    taken: Counter[str] = Counter(in_flight)
    skip = set(skip_messages)
    claimed: list[Outgoing] = []
    while len(claimed) < slots:
        full = [endpoint for endpoint, n in taken.items() if n >= per_endpoint]
        if endpoint_id in full:
            break
        # No more rows than could be claimed: a freed slot reads one row, not a page.
        room = slots - len(claimed)
        if endpoint_id is not None:
            room = min(room, per_endpoint - taken[endpoint_id])
        limit = min(DUE_ROWS, room)
        rows = due(
            now, limit=limit, endpoint_id=endpoint_id, skip_endpoints=full, skip_messages=skip
        )
        for message in rows:
            skip.add(message.id)
            if len(claimed) >= slots or taken[message.endpoint_id] >= per_endpoint:
                continue
            at = timezone.now()
            if claim(message, at):
                claimed.append(outgoing(message, at))
                taken[message.endpoint_id] += 1
        if len(rows) < limit:
            break
    limited = {endpoint for endpoint, n in taken.items() if n >= per_endpoint}
    return Claims(claimed, limited)


# --- The attempt --------------------------------------------------------------------------------


async def attempt(client: httpx.AsyncClient, out: Outgoing) -> Answer:
    """Send one message and read its whole answer (at most ``MAX_ANSWER_BYTES``), all within
    the deadline."""
    limit = deadline()
    status: int | None = None
    try:
        async with asyncio.timeout(limit):
            await ssrf.check_url_async(out.url)
            async with client.stream("POST", out.url, content=out.body, headers=out.headers) as r:
                status = r.status_code
                read = 0
                async for chunk in r.aiter_raw():
                    read += len(chunk)
                    if read > MAX_ANSWER_BYTES:
                        break
                return Answer(status, r.headers.get("retry-after"), r.headers.get("location"))
    except TimeoutError:
        came = f" (status {status} came; the rest did not)" if status is not None else ""
        return Answer(None, error=f"no complete answer within the {limit:g} s deadline{came}")
    except ssrf.Forbidden as error:
        return Answer(None, error=str(error)[:200])
    except (httpx.HTTPError, httpx.InvalidURL) as error:
        return Answer(None, error=f"{type(error).__name__}: {error}"[:200])


# --- The record ---------------------------------------------------------------------------------


def _outcome(out: Outgoing, answer: Answer, now: datetime) -> dict[str, object]:
    """The message's fields after ``answer`` to its attempt number ``out.number``."""
    status = answer.status
    fields: dict[str, object] = {"response_code": status, "last_error": answer.error}
    if status is not None and 200 <= status < 300:
        return fields | {"state": MessageState.DELIVERED, "delivered_at": now, "next_at": None}
    if status is not None and 300 <= status < 400:
        where = f" to {answer.location}" if answer.location else ""
        error = f"redirected ({status}{where}): redirects are not followed; give the final URL"
        return fields | {"state": MessageState.FAILED, "next_at": None, "last_error": error}
    if status == 410:
        return fields | {"state": MessageState.FAILED, "next_at": None, "last_error": "410 Gone"}
    if out.number >= settings.CONSOLE_WEBHOOK_MAX_ATTEMPTS:
        return fields | {"state": MessageState.FAILED, "next_at": None}
    wait = backoff(out.number)
    hinted = retry_after(answer.retry_after, now)
    if hinted is not None:
        wait = max(wait, min(hinted, MAX_RETRY_AFTER_SECONDS))
    return fields | {"next_at": now + timedelta(seconds=wait)}


def record(out: Outgoing, answer: Answer, now: datetime | None = None) -> bool:
    """Write what the attempt found: its try in the log, and the message's new state unless
    its claim was taken over meanwhile. Whether the message was changed."""
    now = now or timezone.now()
    fields = _outcome(out, answer, now)
    fields["last_error"] = str(fields["last_error"])[:200]
    with transaction.atomic():
        DeliveryAttempt.objects.filter(message_id=out.message_id, number=out.number).update(
            finished_at=now,
            response_code=answer.status,
            error=fields["last_error"],
        )
        changed = WebhookMessage.objects.filter(
            id=out.message_id, state=MessageState.PENDING, attempts=out.number
        ).update(**fields)
    if not changed:
        logger.warning(
            "webhook message %s: try %s ended after the message had moved on (its lease ran "
            "out and it was claimed again, or its endpoint was disabled)",
            out.message_id,
            out.number,
        )
    elif answer.status == 410:
        endpoint_disable(endpoint_id=out.endpoint_id, reason="the receiver answered 410 Gone")
    return bool(changed)
