"""Email: one message per recipient who has an address and has not turned the kind off, in
their language, through Django's mail framework (SMTP settings: docs/deployment.md)."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import EmailMessage
from django.db.models import F
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from orbit_console.notifications.delivery import backoff
from orbit_console.notifications.models import Recipient
from orbit_console.notifications.texts import link, rendered

logger = logging.getLogger("orbit.notifications.mail")

# Emails one pass takes at most; the worker's mail lane comes back at once for more.
PASS_LIMIT = 100


def message_for(recipient: Recipient) -> EmailMessage:
    notification = recipient.notification
    title, lines = rendered(notification, recipient.language)
    url = link(notification)
    with translation.override(recipient.language):
        footer = _("Open it in Orbit Console: %(url)s") % {"url": url} if url else ""
        settings_hint = _("You can turn these emails off on your notification settings page.")
    body = "\n".join([title, "", *lines, "", footer, "", settings_hint]).strip() + "\n"
    return EmailMessage(
        subject=f"[Orbit Console] {title}",
        body=body,
        from_email=settings.DEFAULT_FROM_EMAIL,
        to=[recipient.user.email],
        headers={"X-Orbit-Notification": notification.id},
    )


def deliver_due(*, now: datetime | None = None, limit: int = PASS_LIMIT) -> int:
    now = now or timezone.now()
    due = list(
        Recipient.objects.filter(email_state="pending", email_next_at__lte=now)
        .select_related("notification", "user")
        .order_by("email_next_at")[:limit]
    )
    sent = 0
    for recipient in due:
        lease = timezone.now() + timedelta(seconds=settings.EMAIL_TIMEOUT_SECONDS * 3 + 5)
        claimed = Recipient.objects.filter(
            id=recipient.id, email_state="pending", email_next_at=recipient.email_next_at
        ).update(email_attempts=F("email_attempts") + 1, email_next_at=lease)
        if not claimed:
            continue
        attempts = recipient.email_attempts + 1
        try:
            message_for(recipient).send()
        except Exception as error:
            logger.warning(
                "email of %s to user %s failed: %s",
                recipient.notification_id,
                recipient.user_id,
                error,
            )
            if attempts >= settings.CONSOLE_WEBHOOK_MAX_ATTEMPTS:
                Recipient.objects.filter(id=recipient.id).update(
                    email_state="failed", email_next_at=None
                )
            else:
                Recipient.objects.filter(id=recipient.id).update(
                    email_next_at=timezone.now() + timedelta(seconds=backoff(attempts))
                )
            continue
        Recipient.objects.filter(id=recipient.id).update(email_state="sent", email_next_at=None)
        sent += 1
    return sent
