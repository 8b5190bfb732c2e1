"""The writes people make here: reading notifications, and their choices."""

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from orbit_console.lib.live import publish_on_commit
from orbit_console.notifications.kinds import KINDS
from orbit_console.notifications.models import Preference, Recipient
from orbit_console.notifications.outbox import NOTIFY_MESSAGE, person_group


def notifications_mark_read(*, user: User, recipient_ids: list[int] | None = None) -> int:
    """Mark the person's notifications read (all of them without ``recipient_ids``); every open
    menu of theirs hears the new count."""
    with transaction.atomic():
        unread = Recipient.objects.filter(user=user, read_at__isnull=True)
        if recipient_ids is not None:
            unread = unread.filter(id__in=recipient_ids)
        marked = unread.update(read_at=timezone.now())
        publish_on_commit(person_group(user.pk), {"type": NOTIFY_MESSAGE, "notification_id": ""})
    return marked


def preference_set(*, user: User, language: str, email_on: set[str]) -> Preference:
    off = " ".join(sorted(set(KINDS) - email_on))
    preference, _ = Preference.objects.update_or_create(
        user=user, defaults={"language": language, "email_off": off}
    )
    return preference
