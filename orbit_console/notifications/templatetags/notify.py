"""The page header's notifications menu."""

from typing import Any

from django import template

from orbit_console.notifications.selectors import unread_count as count_unread

register = template.Library()


@register.inclusion_tag("notifications/partials/count.html", takes_context=True)
def unread_count(context: template.Context) -> dict[str, Any]:
    """The signed-in person's unread notifications, beside "Notifications" in the page header:
    counted only where the header renders, not for every template a request renders."""
    user = context["request"].user
    return {"unread": count_unread(user.pk) if user.is_authenticated else 0}
