"""What each subscription is owed, and handing it out (docs/events.md).

- **Fan-out.** The ledger calls ``fan_out`` with every event it writes, inside the writing
  transaction: one ``INSERT ... SELECT`` owes the event to every subscription of its namespace
  whose queues include the event's, so the event and what is owed commit (or roll back)
  together, and nothing depends on the order in which concurrent transactions commit. After
  the commit, the namespace's streams are woken (``stream_group``).
- **Claims.** A stream hands out the oldest deliveries that are neither held nor acknowledged:
  a conditional update leases them to its claim for the subscription's ``lease_ms``, so two
  streams of one subscription never hold the same delivery at once.
- **Proofs.** Each handing carries a proof: the subscription, the delivery and the attempt,
  signed. A consumer acknowledges with it, on any connection, and hands it back on a new
  connection to have a delivery it held but did not finish given to it again at once instead
  of after the lease (``deliveries_resume``).
- **Acknowledgement** deletes the delivery: it is owed no more.
- **Retention.** A delivery nobody acknowledges is dropped after
  ``ORBIT_EVENTS_RETENTION_HOURS`` (``deliveries_prune``), and counted.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.core import signing
from django.db import connection, transaction
from django.db.models import F, Q
from prometheus_client import Counter

from orbit_console.events.models import Delivery, Subscription
from orbit_console.ledger.models import TaskEvent
from orbit_console.lib.ids import new_id
from orbit_console.lib.live import publish_on_commit
from orbit_console.lib.rows import Rows

POKE_MESSAGE = "events.poke"
EXPIRED = Counter(
    "orbit_events_expired_total",
    "Deliveries dropped unacknowledged after the retention period",
)
_SIGNER = signing.Signer(salt="orbit.events.proof")
_DELIVERIES = Rows(Delivery)
_SUBSCRIPTIONS = Rows(Subscription)


def stream_group(namespace_id: str) -> str:
    """The channel-layer group that wakes the streams of one namespace."""
    return f"orbit.events.{namespace_id}"


def fan_out(event: TaskEvent) -> None:
    """Owe ``event`` to every subscription in its scope (called by the ledger, inside the
    transaction that wrote the event). One statement, whatever the number of subscriptions;
    none at all costs that one indexed read."""
    ops = connection.ops
    sql = (
        f"INSERT INTO {_DELIVERIES.table} (subscription_id, sequence, attempt, claim_id, "  # noqa: S608 -- the models' own names
        f"created_at) SELECT id, %s, 0, '', %s FROM {_SUBSCRIPTIONS.table} "
        "WHERE namespace_id = %s AND (queue_ids = '' OR queue_ids LIKE %s)"
    )
    with connection.cursor() as cursor:
        # Queue ids are 32 hex characters: no LIKE wildcard can be among them.
        cursor.execute(
            sql,
            [
                event.sequence,
                ops.adapt_datetimefield_value(event.created_at),
                event.namespace_id,
                f"%{event.queue_id}%",
            ],
        )
        owed = cursor.rowcount
    if owed:
        publish_on_commit(stream_group(event.namespace_id), {"type": POKE_MESSAGE})


# --- Proofs -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Proof:
    subscription_id: str
    delivery_id: int
    attempt: int

    def signed(self) -> str:
        return _SIGNER.sign(f"{self.subscription_id}.{self.delivery_id}.{self.attempt}")


def read_proof(text: str, subscription_id: str) -> Proof | None:
    """The proof ``text`` signs, if this server signed it for this subscription."""
    if not isinstance(text, str) or len(text) > 200:
        return None
    try:
        value = _SIGNER.unsign(text)
    except signing.BadSignature:
        return None
    subscription, _, rest = value.partition(".")
    delivery, _, attempt = rest.partition(".")
    if subscription != subscription_id or not (delivery.isdigit() and attempt.isdigit()):
        return None
    return Proof(subscription, int(delivery), int(attempt))


# --- Handing out ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Handed:
    """A delivery handed to a stream: its proof, its lease, and its event."""

    proof: Proof
    leased_until: datetime
    event: TaskEvent


def deliveries_claim(
    subscription: Subscription, *, limit: int, now: datetime, only: list[int] | None = None
) -> list[Handed]:
    """Lease up to ``limit`` deliveries that are free (never handed, or their lease is over),
    oldest event first; ``only``: these deliveries, whoever holds them (a handed-back proof)."""
    if limit <= 0:
        return []
    free = Q(leased_until__isnull=True) | Q(leased_until__lte=now)
    with transaction.atomic():
        owed = Delivery.objects.filter(subscription_id=subscription.id)
        candidates = owed.filter(id__in=only[:limit]) if only is not None else owed.filter(free)
        ids = list(candidates.order_by("sequence").values_list("id", flat=True)[:limit])
        if not ids:
            return []
        claim_id = new_id()
        leased_until = now + timedelta(milliseconds=subscription.lease_ms)
        won = owed.filter(id__in=ids)
        if only is None:
            won = won.filter(free)  # another stream may have taken some meanwhile
        won.update(leased_until=leased_until, attempt=F("attempt") + 1, claim_id=claim_id)
        claimed = list(
            owed.filter(id__in=ids, claim_id=claim_id)
            .order_by("sequence")
            .values_list("id", "sequence", "attempt")
        )
        events = TaskEvent.objects.in_bulk([sequence for _, sequence, _ in claimed])
    return [
        Handed(Proof(subscription.id, delivery_id, attempt), leased_until, events[sequence])
        for delivery_id, sequence, attempt in claimed
        if sequence in events
    ]


def deliveries_resume(
    subscription: Subscription, proofs: list[Proof], *, now: datetime
) -> list[Handed]:
    """Hand back at once the deliveries of these proofs that are still owed and whose last
    handing is the one the proof names (a delivery handed to someone else since is theirs)."""
    if not proofs:
        return []
    current = Q()
    for proof in proofs:
        current |= Q(id=proof.delivery_id, attempt=proof.attempt)
    held = list(
        Delivery.objects.filter(current, subscription_id=subscription.id).values_list(
            "id", flat=True
        )
    )
    return deliveries_claim(subscription, limit=len(held), now=now, only=held)


def delivery_ack(proof: Proof) -> bool:
    """The event of this delivery is handled: it is owed no more. ``False`` when it was not
    owed any more (acknowledged before, or dropped), which is an answer, not an error: the
    consumer's work is done either way. A proof of an earlier handing counts: the event was
    handled."""
    deleted, _ = Delivery.objects.filter(
        id=proof.delivery_id, subscription_id=proof.subscription_id
    ).delete()
    return bool(deleted)


def deliveries_prune(*, now: datetime) -> int:
    """Drop the deliveries older than the retention period, acknowledged by nobody."""
    cutoff = now - timedelta(hours=settings.ORBIT_EVENTS_RETENTION_HOURS)
    dropped, _ = Delivery.objects.filter(created_at__lt=cutoff).delete()
    if dropped:
        EXPIRED.inc(dropped)
    return dropped


def backlog(subscription: Subscription, *, now: datetime) -> dict[str, int]:
    """How many events the subscription is owed, and how many of them are held now."""
    owed = Delivery.objects.filter(subscription_id=subscription.id)
    return {
        "backlog": owed.count(),
        "in_flight": owed.filter(leased_until__gt=now).count(),
    }
