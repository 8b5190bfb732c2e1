"""Pages of a task's timeline: platform operations (keyset-paged by the API) merged with the
console's events that fall in the same time window."""

import asyncio
from dataclasses import dataclass
from datetime import datetime

from asgiref.sync import sync_to_async

from orbit_console.client import OrbitClient, OrbitError
from orbit_console.decisions.models import ConsoleEvent
from orbit_console.people.accounts import mark_company
from orbit_console.people.person import Person, actor_names
from orbit_console.timeline.entries import Entry, from_event, from_operation, merged

PAGE_SIZE = 20
# A page that reconnects catches up through at most this many pages (200 operations) and starts
# its timeline over when it missed more.
CATCH_UP_PAGES = 10
CONSOLE_ONLY_LIMIT = 200


@dataclass
class TimelinePage:
    entries: list[Entry]
    can_audit: bool
    next_cursor: str | None  # the API's cursor for the next page of operations
    until: datetime | None  # console events of the next page are older than this


async def build_page(
    orbit: OrbitClient,
    person: Person,
    task_id: str,
    *,
    cursor: str | None = None,
    until: datetime | None = None,
) -> TimelinePage:
    can_audit = person.can("tasks:audit:read")
    entries: list[Entry] = []
    lower: datetime | None = None
    next_cursor: str | None = None
    if can_audit:
        try:
            page = await orbit.list_task_operations(task_id, limit=PAGE_SIZE, cursor=cursor)
        except OrbitError as error:
            if error.status != 403:
                raise
            can_audit = False  # the platform says no: show the console's events only
        else:
            details = await asyncio.gather(
                *(orbit.get_task_operation(task_id, item.id) for item in page.items)
            )
            names = await actor_names({detail.actor_id for detail in details})
            entries = [from_operation(detail, names) for detail in details]
            next_cursor = page.next_cursor
            if next_cursor and page.items:
                lower = page.items[-1].created_at
    events = await sync_to_async(_console_events)(task_id, lower, until, limited=not can_audit)
    entries.extend(from_event(event) for event in events)
    return TimelinePage(merged(entries), can_audit, next_cursor, lower)


@dataclass
class CatchUp:
    page: TimelinePage
    complete: bool  # False: more was missed than a catch-up fetches; the page starts over


async def build_catch_up(
    orbit: OrbitClient, person: Person, task_id: str, *, since: datetime | None
) -> CatchUp:
    """What a page whose newest platform entry is from ``since`` may have missed while its
    socket was down: the newest pages, down to ``since``, merged into one. When even
    ``CATCH_UP_PAGES`` pages do not reach back that far (or the page had no platform entry), the
    answer is the newest page alone, marked incomplete, so the page replaces its timeline rather
    than keep a gap in it."""
    first = page = await build_page(orbit, person, task_id)
    entries = list(page.entries)
    for _ in range(CATCH_UP_PAGES - 1):
        if not _may_have_missed_more(page, since):
            break
        page = await build_page(orbit, person, task_id, cursor=page.next_cursor, until=page.until)
        entries.extend(page.entries)
    if _may_have_missed_more(page, since):
        return CatchUp(first, complete=False)
    return CatchUp(
        TimelinePage(merged(entries), first.can_audit, page.next_cursor, page.until), complete=True
    )


def _may_have_missed_more(page: TimelinePage, since: datetime | None) -> bool:
    """Whether entries older than ``page`` may still be newer than ``since`` (ties included)."""
    if page.next_cursor is None:
        return False
    return since is None or page.until is None or page.until >= since


def _console_events(
    task_id: str, lower: datetime | None, until: datetime | None, *, limited: bool
) -> list[ConsoleEvent]:
    events = ConsoleEvent.objects.filter(task_id=task_id).select_related(
        "actor", "submission__created_by"
    )
    if lower is not None:
        events = events.filter(created_at__gte=lower)
    if until is not None:
        events = events.filter(created_at__lt=until)
    events = events.order_by("-created_at", "-id")
    read = list(events[:CONSOLE_ONLY_LIMIT] if limited else events)
    mark_company(
        [e.actor for e in read]
        + [e.submission.created_by for e in read if e.submission is not None]
    )
    return read
