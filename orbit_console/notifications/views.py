"""The notifications page (the menu's list, mark read, the person's choices) and, for
administrators, the webhooks' delivery log with replay."""

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import BadRequest, PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils import translation
from django.views.decorators.http import require_GET, require_POST

from orbit_console.lib.numbers import decimal_in
from orbit_console.notifications import webhooks
from orbit_console.notifications.kinds import KINDS, title
from orbit_console.notifications.models import Endpoint, Preference, WebhookMessage
from orbit_console.notifications.selectors import latest
from orbit_console.notifications.services import notifications_mark_read, preference_set
from orbit_console.notifications.texts import lines

LOG_ROWS = 100
# Recipient rows are numbered by the database (a 64-bit auto field).
MAX_ROW_ID = 2**63 - 1


def _user(request: HttpRequest) -> User:
    user = request.user
    assert isinstance(user, User)  # noqa: S101 -- behind login_required
    return user


@require_GET
@login_required
def notification_list(request: HttpRequest) -> HttpResponse:
    user = _user(request)
    preference = Preference.objects.filter(user=user).first()
    off = preference.email_off_kinds if preference else frozenset()
    items = [
        {
            "id": r.id,
            "unread": r.read_at is None,
            "title": title(r.notification.kind),
            "lines": lines(r.notification),
            "path": r.notification.path,
            "created_at": r.notification.created_at,
        }
        for r in latest(user.pk)
    ]
    kinds = [
        {"kind": kind, "label": label, "email": kind not in off} for kind, label in KINDS.items()
    ]
    context = {
        "items": items,
        "kinds": kinds,
        "notify_languages": settings.LANGUAGES,
        "language": (preference.language if preference else "") or translation.get_language(),
        "has_email": bool(user.email),
    }
    return render(request, "notifications/list.html", context)


@require_POST
@login_required
def notification_read(request: HttpRequest) -> HttpResponse:
    """Mark the notifications named by ``recipient`` read (each one a row's number), or all of
    them when none is named. A value that is no row's number changes nothing (400)."""
    values = request.POST.getlist("recipient")
    try:
        ids = [decimal_in(value, 1, MAX_ROW_ID) for value in values]
    except ValueError:
        raise BadRequest("recipient: not a notification's number") from None
    notifications_mark_read(user=_user(request), recipient_ids=ids if values else None)
    return HttpResponseRedirect(reverse("notifications:list"))


@require_POST
@login_required
def preferences_save(request: HttpRequest) -> HttpResponse:
    language = request.POST.get("language", "")
    if language not in dict(settings.LANGUAGES):
        language = ""
    email_on = set(request.POST.getlist("email")) & set(KINDS)
    preference_set(user=_user(request), language=language, email_on=email_on)
    return HttpResponseRedirect(reverse("notifications:list"))


def administrators_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Signed in (else sent to sign in), and an administrator (staff), else 403."""

    @wraps(view)
    def checked(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if not (request.user.is_staff or request.user.is_superuser):  # type: ignore[union-attr]
            raise PermissionDenied
        return view(request, *args, **kwargs)

    return login_required(checked)


@require_GET
@administrators_only
def delivery_log(request: HttpRequest) -> HttpResponse:
    endpoints = list(Endpoint.objects.order_by("namespace_id", "created_at"))
    messages = WebhookMessage.objects.select_related("notification", "endpoint")
    chosen = request.GET.get("endpoint", "")
    if chosen:
        messages = messages.filter(endpoint_id=chosen)
    messages = messages.prefetch_related("tries").order_by("-created_at")[:LOG_ROWS]
    return render(
        request,
        "notifications/deliveries.html",
        {"endpoints": endpoints, "messages": messages, "chosen": chosen},
    )


@require_POST
@administrators_only
def delivery_replay(request: HttpRequest, message_id: str) -> HttpResponse:
    try:
        webhooks.replay(message_id=message_id)
    except WebhookMessage.DoesNotExist:
        raise Http404("no such webhook message") from None
    return HttpResponseRedirect(reverse("notifications:deliveries"))
