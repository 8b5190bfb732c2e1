from collections.abc import Awaitable, Callable
from zoneinfo import ZoneInfo

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse
from django.utils import timezone

from orbit_console.lib.readers import TIMEZONE_COOKIE, zone_named


def zone_of(request: HttpRequest) -> ZoneInfo:
    """The person's time zone as their browser reported it (static/js/console.js), else UTC."""
    return zone_named(request.COOKIES.get(TIMEZONE_COOKIE, ""))


class TimezoneMiddleware:
    """Show times in the person's local time zone (UTC on hover, see templatetags)."""

    async_capable = True
    sync_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponse]]) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        zone = zone_of(request)
        request.zone = zone  # type: ignore[attr-defined]
        timezone.activate(zone)
        try:
            return await self.get_response(request)
        finally:
            timezone.deactivate()
