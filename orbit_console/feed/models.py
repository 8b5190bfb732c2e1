"""The console's side of Orbit's event stream (docs/events.md): the subscriptions it consumes,
which console process consumes them, and the events it has applied."""

from django.db import models

from orbit_console.lib.ids import new_id


class SourceStatus(models.TextChoices):
    STARTING = "starting", "starting"
    LIVE = "live", "live"
    STALLED = "stalled", "stalled: connected, but its events are not being applied"
    DOWN = "down", "down: reconnecting"
    MISSING = "missing", "missing: this Orbit has no event stream (E1)"
    REFUSED = "refused", "refused: the credential or the subscription was refused"


class Source(models.Model):
    """A subscription of Orbit's event stream that the console consumes, one per namespace, with
    the token it streams with (encrypted, as people's tokens are: ``lib/secretbox.py``).

    ``status`` is what the consuming process last knew of the stream, renewed while it is live
    (``status_at``): a stream not renewed recently is not live, whatever it says, and pages and
    follow-ups then look for themselves (I4). A stream whose consumer is held up on an event, or
    could not read again what an event prompts, is ``stalled``: not live either."""

    id = models.CharField(max_length=32, primary_key=True, default=new_id, editable=False)
    namespace_id = models.CharField(max_length=64, unique=True)
    subscription_id = models.CharField(max_length=64)
    token_ciphertext = models.TextField()
    label = models.CharField(max_length=200)
    created_at = models.DateTimeField()
    status = models.CharField(
        max_length=16, choices=SourceStatus.choices, default=SourceStatus.STARTING
    )
    status_note = models.TextField(blank=True)
    status_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.label} ({self.subscription_id})"


class Leadership(models.Model):
    """Which console process consumes the stream: the one holding this lease, renewed while
    it lives; when it stops renewing, another process takes it over once it has run out."""

    name = models.CharField(max_length=40, primary_key=True)
    holder = models.CharField(max_length=120)
    expires_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name}: {self.holder}"


class InboxEvent(models.Model):
    """An event of the stream the console has applied, recorded in the transaction of its
    effect: a delivery that comes again (at least once) finds it here and is only
    acknowledged."""

    event_id = models.CharField(max_length=32, primary_key=True)
    source_id = models.CharField(max_length=32)
    task_id = models.CharField(max_length=64)
    event_type = models.CharField(max_length=32)
    received_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.event_type} {self.task_id}"


class SetAsideEvent(models.Model):
    """An event of the stream that the console acknowledged without applying it, so that it does
    not hold up the events behind it: the event broke the stream's schema, or what it prompts to
    read again was refused (an answer too large, malformed, or about another task), or did not
    come in ``SET_ASIDE_AFTER`` deliveries (docs/events.md). ``event_id`` and ``task_id`` are
    blank when the event did not say them readably. Kept as long as the inbox."""

    id = models.CharField(max_length=32, primary_key=True, default=new_id, editable=False)
    source_id = models.CharField(max_length=32, db_index=True)
    event_id = models.CharField(max_length=32, blank=True)
    task_id = models.CharField(max_length=64, blank=True)
    event_type = models.CharField(max_length=32, blank=True)
    attempt = models.PositiveIntegerField(default=1)
    reason = models.CharField(max_length=32)  # feed/metrics.SET_ASIDE_REASONS
    detail = models.TextField(blank=True)
    set_aside_at = models.DateTimeField(db_index=True)

    def __str__(self) -> str:
        return f"{self.reason} {self.event_id or '-'}"
