"""The timeline's pages: older entries ("Older"), and the newest page for a page that
reconnects and must catch up with what it missed."""

from datetime import datetime

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from orbit_console.console.views.common import arender, client, console_view
from orbit_console.console.views.tasks import task_id_or_404
from orbit_console.timeline.builder import build_page


@require_GET
@console_view
async def older(request: HttpRequest, task_id: str) -> HttpResponse:
    task_id = task_id_or_404(task_id)
    until = _time(request.GET.get("until"))
    cursor = request.GET.get("cursor") or None
    person = request.person  # type: ignore[attr-defined]
    async with client(request) as orbit:
        timeline = await build_page(orbit, person, task_id, cursor=cursor, until=until)
    context = {"timeline": timeline, "task": {"id": task_id}}
    template = "timeline/partials/page.html" if request.htmx else "timeline/older.html"  # type: ignore[attr-defined]
    return await arender(request, template, context)


@require_GET
@console_view
async def latest(request: HttpRequest, task_id: str) -> HttpResponse:
    task_id = task_id_or_404(task_id)
    async with client(request) as orbit:
        timeline = await build_page(orbit, request.person, task_id)  # type: ignore[attr-defined]
    return await arender(request, "timeline/partials/entries.html", {"timeline": timeline})


def _time(value: str | None) -> datetime | None:
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None
