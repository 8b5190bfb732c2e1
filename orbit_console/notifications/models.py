"""What the console tells people: the outbox of notifications, who each is for, and each
person's choices (docs/notifications.md).

A notification is written in the transaction of the act that causes it (``outbox.py``) and
never changed after; what became of it for each person and each webhook endpoint is recorded
beside it. No row holds a token, a full business key or a result body (E2).
"""

import json
from functools import cached_property
from typing import Any

from django.conf import settings
from django.db import models

from orbit_console.lib.ids import new_id


class Notification(models.Model):
    """One thing to tell: its kind, the namespace it belongs to, the ids of what it is about
    and a few plain facts (states, counts, the reason). ``key`` names the occurrence
    (``<kind>:<subject>``): a unique index makes telling it twice impossible."""

    id = models.CharField(max_length=32, primary_key=True, default=new_id, editable=False)
    kind = models.CharField(max_length=40)
    key = models.CharField(max_length=120, unique=True)
    namespace_id = models.CharField(max_length=64, blank=True, default="")
    task_id = models.CharField(max_length=64, blank=True, default="")
    proposal_id = models.CharField(max_length=32, blank=True, default="")
    batch_id = models.CharField(max_length=32, blank=True, default="")
    submission_id = models.CharField(max_length=32, blank=True, default="")
    # Plain facts (JSON): state, action, counts, reason; never a body or a business key.
    facts = models.TextField(default="{}")
    # The site path of the page it is about ("/proposals/<id>"): links are made absolute with
    # CONSOLE_BASE_URL where they leave the console.
    path = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField(db_index=True)

    class Meta:
        indexes = [models.Index(fields=["namespace_id", "created_at"], name="notification_ns")]

    def __str__(self) -> str:
        return f"{self.kind} {self.key}"

    @cached_property
    def data(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.facts)
        return found


class Recipient(models.Model):
    """One person a notification is for: their menu shows it until they read it, and an email
    goes to them unless they turned that kind off. ``language`` is theirs when it was written."""

    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="recipients"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notifications"
    )
    language = models.CharField(max_length=16)
    read_at = models.DateTimeField(null=True, blank=True)
    # Email: "" none owed (turned off, no address), "pending", "sent", "failed".
    email_state = models.CharField(max_length=8, blank=True, default="")
    email_attempts = models.PositiveSmallIntegerField(default=0)
    email_next_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["notification", "user"], name="one_recipient_each")
        ]
        indexes = [
            models.Index(fields=["user", "read_at"], name="recipient_unread"),
            models.Index(fields=["email_state", "email_next_at"], name="recipient_email_due"),
        ]

    def __str__(self) -> str:
        return f"{self.notification_id} for {self.user_id}"


class Preference(models.Model):
    """A person's choices: the language they are told in, and the kinds they want no email
    for (space-separated; the menu shows every kind)."""

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="notification_preference"
    )
    language = models.CharField(max_length=16, blank=True, default="")
    email_off = models.TextField(blank=True, default="")

    def __str__(self) -> str:
        return f"preferences of {self.user_id}"

    @property
    def email_off_kinds(self) -> frozenset[str]:
        return frozenset(self.email_off.split())


class EndpointFormat(models.TextChoices):
    JSON = "json", "JSON"
    SLACK = "slack", "Slack"


class Endpoint(models.Model):
    """One outgoing webhook of a namespace: where to, which kinds (empty: every kind of the
    namespace), in which payload format and language. Its signing secrets are sealed at rest
    (``lib.secretbox``, as Orbit tokens are): ``secret_sealed`` signs, and during a rotation
    ``previous_secret_sealed`` signs too, so that receivers holding either one verify."""

    id = models.CharField(max_length=32, primary_key=True, default=new_id, editable=False)
    namespace_id = models.CharField(max_length=64, db_index=True)
    url = models.URLField(max_length=500)
    event_types = models.TextField(blank=True, default="")
    format = models.CharField(
        max_length=8, choices=EndpointFormat.choices, default=EndpointFormat.JSON
    )
    language = models.CharField(max_length=16, default="en")
    secret_sealed = models.TextField()
    previous_secret_sealed = models.TextField(blank=True, default="")
    active = models.BooleanField(default=True)
    disabled_reason = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"webhook {self.id} of {self.namespace_id}"

    @property
    def kinds(self) -> frozenset[str]:
        return frozenset(self.event_types.split())

    def wants(self, kind: str) -> bool:
        return not self.kinds or kind in self.kinds


class MessageState(models.TextChoices):
    PENDING = "pending", "pending"
    DELIVERED = "delivered", "delivered"
    FAILED = "failed", "failed"


class WebhookMessage(models.Model):
    """One notification owed to one endpoint, and the log of its delivery. ``id`` is its
    ``webhook-id``: one per notification and endpoint (unique), the same on every attempt and
    on a replay, so that a receiver deduplicates on it. ``body`` is fixed when it is first
    written, so that every attempt sends the same bytes."""

    id = models.CharField(max_length=40, primary_key=True)
    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="messages")
    notification = models.ForeignKey(
        Notification, on_delete=models.CASCADE, related_name="webhook_messages"
    )
    body = models.TextField()
    state = models.CharField(
        max_length=10, choices=MessageState.choices, default=MessageState.PENDING
    )
    attempts = models.PositiveSmallIntegerField(default=0)
    next_at = models.DateTimeField(null=True, blank=True)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    last_error = models.CharField(max_length=200, blank=True, default="")
    created_at = models.DateTimeField()
    delivered_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["endpoint", "notification"], name="one_message_per_endpoint"
            )
        ]
        indexes = [
            models.Index(fields=["state", "next_at"], name="webhook_due"),
            # One endpoint's due messages, found at once behind another endpoint's backlog.
            models.Index(fields=["endpoint", "state", "next_at"], name="webhook_due_by_endpoint"),
        ]

    def __str__(self) -> str:
        return f"{self.id} to {self.endpoint_id}: {self.state}"


class DeliveryAttempt(models.Model):
    """One try of a webhook message, written when the worker claims it and completed with what
    came back: the delivery log keeps every try, not only the last. ``finished_at`` stays empty
    for a try whose worker stopped before it could record the answer (the message was tried
    again after its lease)."""

    message = models.ForeignKey(WebhookMessage, on_delete=models.CASCADE, related_name="tries")
    number = models.PositiveSmallIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    response_code = models.PositiveSmallIntegerField(null=True, blank=True)
    error = models.CharField(max_length=200, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["message", "number"], name="one_try_per_number")
        ]
        ordering = ["message", "number"]

    def __str__(self) -> str:
        return f"{self.message_id} try {self.number}"

    @property
    def seconds(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()
