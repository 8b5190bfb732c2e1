from django.http import HttpRequest

from orbit_console.notifications.selectors import unread_count


def notifications(request: HttpRequest) -> dict[str, object]:
    """The unread count of the page header's notifications menu."""
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    return {"notifications_unread": unread_count(user.pk)}
