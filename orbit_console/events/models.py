"""The event stream's durable state (docs/events.md): who subscribes to what, and which events
each subscription is still owed.

Like the ledger's tables, these refer to tasks, events and namespaces by plain id columns, not
database foreign keys.
"""

from django.db import models

from orbit_console.lib.ids import new_id


def _id_field(**kwargs: object) -> models.CharField:
    return models.CharField(max_length=32, **kwargs)  # type: ignore[arg-type]


class Subscription(models.Model):
    """A subscriber's standing order for the events of one namespace, or of some of its queues.

    Every event written after the subscription was created and within its scope is owed to it
    as a ``Delivery`` until a consumer acknowledges it. It belongs to the credential that
    created it (``credential_id``): only that credential lists, reads, streams and deletes it.
    Created once per credential and Idempotency-Key (C2): ``key_digest`` and
    ``request_digest`` answer a repeated creation with the same subscription.
    """

    id = _id_field(primary_key=True, default=new_id, editable=False)
    namespace_id = _id_field()
    # The owner. Empty for a subscription made before owners were kept (it belongs to the
    # actor that made it, ``actor_id``) or by ``manage.py events subscribe`` without
    # ``--credential`` (no credential's: the command manages it). docs/events.md.
    credential_id = _id_field(blank=True, default="")
    name = models.CharField(max_length=200)
    # Space-separated queue ids; empty: the whole namespace.
    queue_ids = models.TextField(blank=True, default="")
    # How long a consumer holds a delivery before it is handed out again.
    lease_ms = models.PositiveIntegerField()
    actor_id = _id_field()
    created_at = models.DateTimeField()
    key_digest = models.CharField(max_length=64)
    request_digest = models.CharField(max_length=64)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace_id", "credential_id", "key_digest"],
                name="subscription_idempotency",
            ),
        ]
        indexes = [
            models.Index(fields=["namespace_id", "created_at"], name="subscription_ns"),
            models.Index(fields=["credential_id", "created_at"], name="subscription_owner"),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"

    @property
    def queues(self) -> frozenset[str]:
        return frozenset(self.queue_ids.split())


class Delivery(models.Model):
    """One event owed to one subscription, from the moment the event was written until a
    consumer acknowledges it (then the row is deleted).

    ``leased_until`` is empty while the event waits; a consumer that is handed the event holds
    it until then (``attempt`` counts the handings, ``claim_id`` names the last), after which it
    is handed out again: delivery is at least once.
    """

    id = models.BigAutoField(primary_key=True)
    subscription_id = _id_field()
    sequence = models.PositiveBigIntegerField()  # the ledger's ``TaskEvent.sequence``
    attempt = models.PositiveIntegerField(default=0)
    leased_until = models.DateTimeField(null=True, blank=True)
    claim_id = _id_field(default="")
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["subscription_id", "sequence"], name="delivery_owed"),
        ]
        indexes = [models.Index(fields=["created_at"], name="delivery_created")]

    def __str__(self) -> str:
        return f"event {self.sequence} for {self.subscription_id}"


class OpenStream(models.Model):
    """One open stream of a subscription, counted against the limits on open streams per
    credential and per namespace (``ORBIT_EVENTS_MAX_STREAMS_*``, docs/events.md).

    The process serving the stream inserts the row when it admits the handshake, moves
    ``expires_at`` on while the stream stays open, and deletes the row when it closes. A row
    whose ``expires_at`` has passed belongs to a process that died (or stalled) without
    closing: it counts no more, and the next admission in its namespace deletes it.
    """

    id = _id_field(primary_key=True, default=new_id, editable=False)
    namespace_id = _id_field()
    credential_id = _id_field()
    subscription_id = _id_field()
    opened_at = models.DateTimeField()
    expires_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["namespace_id", "expires_at"], name="open_stream_ns"),
            models.Index(fields=["credential_id", "expires_at"], name="open_stream_owner"),
        ]

    def __str__(self) -> str:
        return f"stream {self.id} of {self.subscription_id}"
