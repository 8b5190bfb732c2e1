"""Reads of a person's notifications."""

from django.db.models import QuerySet

from orbit_console.notifications.models import Recipient

PAGE = 50


def unread_count(user_id: int) -> int:
    return Recipient.objects.filter(user_id=user_id, read_at__isnull=True).count()


def latest(user_id: int) -> QuerySet[Recipient]:
    return (
        Recipient.objects.filter(user_id=user_id)
        .select_related("notification")
        .order_by("-notification__created_at", "-id")[:PAGE]
    )
