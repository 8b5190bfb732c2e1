"""The event-stream subscriptions the console consumes (``Source``), and what it knows of each
stream: whether it is live, for the parts of the console that look for themselves when it is not
(the timeline's watcher, the follow-ups; I4)."""

import time
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from orbit_console.client import OrbitClient
from orbit_console.client.events import EventStreamConnection, open_stream
from orbit_console.client.inprocess import base_url, open_socket
from orbit_console.feed.models import Source, SourceStatus
from orbit_console.lib.secretbox import seal, unseal
from orbit_console.people.person import token_client


def renew_seconds() -> float:
    """How often the consuming process renews its lease and its live streams' status."""
    return settings.CONSOLE_FEED_LEASE_SECONDS / 3


def console_origin() -> str:
    """The Origin the console declares when it opens a stream (one the Orbit must allow):
    ``ORBIT_EVENTS_ORIGIN``, else the console's own address."""
    if settings.ORBIT_EVENTS_ORIGIN:
        return str(settings.ORBIT_EVENTS_ORIGIN)
    if settings.CSRF_TRUSTED_ORIGINS:
        return str(settings.CSRF_TRUSTED_ORIGINS[0])
    return base_url()


async def source_add(*, token: str, label: str, subscription_id: str = "") -> Source:
    """Consume a subscription with ``token`` (which needs ``events:subscribe``, ``tasks:read``
    and, to follow timelines of an external Orbit, ``tasks:audit:read``): the one named, or one
    this creates in the token's namespace (once: the same namespace's key answers the same
    subscription again). The API judges the token; its refusal is raised as it came."""
    async with token_client(token) as orbit:
        credential = await orbit.get_credential()
        if subscription_id:
            subscription = await orbit.get_subscription(subscription_id)
        else:
            subscription = await orbit.create_subscription(
                name=label, idempotency_key=f"orbit-console-feed-{credential.namespace_id}"
            )
    source, _ = await Source.objects.aupdate_or_create(
        namespace_id=subscription.namespace_id,
        defaults={
            "subscription_id": subscription.id,
            "token_ciphertext": seal(token),
            "label": label,
            "created_at": timezone.now(),
            "status": SourceStatus.STARTING,
            "status_note": "",
        },
    )
    return source


def source_client(source: Source) -> OrbitClient:
    return token_client(unseal(source.token_ciphertext))


async def source_stream(source: Source) -> EventStreamConnection:
    """Open the source's stream: over the network to an external Orbit (or to the embedded
    API served apart, ``ORBIT_EMBEDDED_API_URL``), else to this process's own embedded API."""
    token = unseal(source.token_ciphertext)
    largest = settings.ORBIT_EVENTS_MAX_FRAME_BYTES
    if settings.ORBIT_API_URL:
        return await open_stream(
            settings.ORBIT_API_URL,
            token,
            source.subscription_id,
            origin=console_origin(),
            max_frame_bytes=largest,
        )
    return await open_stream(
        base_url(),
        token,
        source.subscription_id,
        origin=base_url(),
        max_frame_bytes=largest,
        in_process=open_socket,
    )


def source_status(source_id: str, status: str, note: str = "") -> None:
    Source.objects.filter(id=source_id).update(
        status=status, status_note=note[:2000], status_at=timezone.now()
    )


_live: tuple[float, frozenset[str]] = (0.0, frozenset())


def live_namespaces(*, now: datetime | None = None) -> frozenset[str]:
    """The namespaces whose stream is live now: said so, and renewed within three renewals.
    Read at most once a second per process."""
    global _live
    if now is None and time.monotonic() - _live[0] < 1.0:
        return _live[1]
    now = now or timezone.now()
    recent = now - timedelta(seconds=3 * renew_seconds())
    found = frozenset(
        Source.objects.filter(status=SourceStatus.LIVE, status_at__gte=recent).values_list(
            "namespace_id", flat=True
        )
    )
    _live = (time.monotonic(), found)
    return found
