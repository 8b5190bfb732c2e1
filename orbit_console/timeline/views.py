"""The timeline's pages: older entries ("Older"), and the newest page for a page that
reconnects and must catch up with what it missed."""

from datetime import datetime

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from orbit_console.console.views.common import arender, console_view
from orbit_console.console.views.tasks import task_id_or_404
from orbit_console.people.access import require_task_access
from orbit_console.people.person import orbit_client
from orbit_console.timeline.builder import build_catch_up, build_page


@require_GET
@console_view
async def older(request: HttpRequest, task_id: str) -> HttpResponse:
    task_id = task_id_or_404(task_id)
    person = request.person  # type: ignore[attr-defined]
    credential = await require_task_access(person, task_id)
    until = _time(request.GET.get("until"))
    cursor = request.GET.get("cursor") or None
    async with orbit_client(credential) as orbit:
        timeline = await build_page(orbit, person, task_id, cursor=cursor, until=until)
    context = {"timeline": timeline, "task": {"id": task_id}}
    template = "timeline/partials/page.html" if request.htmx else "timeline/older.html"  # type: ignore[attr-defined]
    return await arender(request, template, context)


@require_GET
@console_view
async def latest(request: HttpRequest, task_id: str) -> HttpResponse:
    """What a reconnecting page missed since its newest platform entry (``since``): the entries
    to merge, or — answered with ``Orbit-Timeline: reset`` — the newest page to start over from,
    with its "Older" control."""
    task_id = task_id_or_404(task_id)
    credential = await require_task_access(request.person, task_id)  # type: ignore[attr-defined]
    since = _time(request.GET.get("since"))
    async with orbit_client(credential) as orbit:
        catch_up = await build_catch_up(orbit, request.person, task_id, since=since)  # type: ignore[attr-defined]
    context = {"timeline": catch_up.page, "task": {"id": task_id}, "reset": not catch_up.complete}
    response = await arender(request, "timeline/partials/catch_up.html", context)
    if not catch_up.complete:
        response["Orbit-Timeline"] = "reset"
    return response


def _time(value: str | None) -> datetime | None:
    """An ISO 8601 time with its offset; anything else (a time without one included) is
    ignored, as if the parameter were absent."""
    if not value:
        return None
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else None
