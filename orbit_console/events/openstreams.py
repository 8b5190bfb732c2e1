"""Open streams, counted across every process that serves them (docs/events.md, "Limits").

A credential may keep at most ``ORBIT_EVENTS_MAX_STREAMS_PER_CREDENTIAL`` streams open at once,
and all the credentials of a namespace together ``ORBIT_EVENTS_MAX_STREAMS_PER_NAMESPACE``: each
open stream looks at the database every poll interval, on the one sync thread of its process
that also serves the console's pages (ops/handler.py), and a few hundred idle streams made
those pages wait seconds (issue 29).

The count lives in the database (``OpenStream``), not in a process: streams of one credential
are spread over the replicas and workers. A row is a lease: the serving process renews it at
each re-check of the credential (``ORBIT_EVENTS_RECHECK_SECONDS``) and deletes it when the
stream closes; a process killed with streams open leaves rows that stop counting once their
lease has run out (``lease()``: three re-checks), so its slots come back by themselves.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction

from orbit_console.events.models import OpenStream, Subscription
from orbit_console.events.subscriptions import lock_namespace
from orbit_console.ledger.errors import StreamLimit
from orbit_console.ledger.models import Credential


def lease() -> timedelta:
    """How long an open stream's row counts without being renewed: three re-checks, so that
    one late renewal never frees a slot that is in use."""
    return timedelta(seconds=3 * settings.ORBIT_EVENTS_RECHECK_SECONDS)


def open_stream_admit(
    *, credential: Credential, subscription: Subscription, now: datetime
) -> OpenStream:
    """Count a stream the credential opens, or refuse it with 429 ``STREAM_LIMIT``."""
    with transaction.atomic():
        lock_namespace(credential.namespace_id)
        # What dead processes left behind in this namespace no longer counts: drop it.
        OpenStream.objects.filter(
            namespace_id=credential.namespace_id, expires_at__lte=now
        ).delete()
        live = OpenStream.objects.filter(expires_at__gt=now)
        mine = live.filter(credential_id=credential.id).count()
        most = settings.ORBIT_EVENTS_MAX_STREAMS_PER_CREDENTIAL
        if mine >= most:
            raise StreamLimit(
                f"this credential has {mine} streams open, the most one credential may have "
                f"({most}): close one first"
            )
        theirs = live.filter(namespace_id=credential.namespace_id).count()
        most = settings.ORBIT_EVENTS_MAX_STREAMS_PER_NAMESPACE
        if theirs >= most:
            raise StreamLimit(
                f"the namespace has {theirs} streams open, the most one namespace may have "
                f"({most}): close one first"
            )
        return OpenStream.objects.create(
            namespace_id=credential.namespace_id,
            credential_id=credential.id,
            subscription_id=subscription.id,
            opened_at=now,
            expires_at=now + lease(),
        )


def open_stream_renew(*, stream_id: str, now: datetime) -> bool:
    """Keep counting the stream; ``False`` when its row is gone (its lease ran out while its
    process stalled, and an admission dropped it): the stream must be admitted again."""
    return bool(OpenStream.objects.filter(id=stream_id).update(expires_at=now + lease()))


def open_stream_close(*, stream_id: str) -> None:
    OpenStream.objects.filter(id=stream_id).delete()
