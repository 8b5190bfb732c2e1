"""The task page: every field, the attempts, the retry chain, and which recoveries are possible."""

import asyncio
import functools
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.utils.module_loading import import_string
from django.views.decorators.http import require_GET

from orbit_console.client import OrbitClient, OrbitError, OutcomeUnknown, Task
from orbit_console.console.availability import retry_availability, review_availability
from orbit_console.console.views.common import arender, console_view, task_client
from orbit_console.console.waiting import pending_proposal_on
from orbit_console.decisions.followups import followup_observe
from orbit_console.decisions.models import Proposal, Submission
from orbit_console.lib.ids import is_id
from orbit_console.people.person import Person

TimelineOf = Callable[[OrbitClient, Person, str], Awaitable[Any]]


def task_id_or_404(task_id: str) -> str:
    if not is_id(task_id):
        raise Http404("not a task id")
    return task_id


@require_GET
@console_view
async def task_detail(request: HttpRequest, task_id: str) -> HttpResponse:
    task_id = task_id_or_404(task_id)
    person: Person = request.person  # type: ignore[attr-defined]
    async with await task_client(request, task_id) as orbit:
        task = await orbit.get_task(task_id)
        attempts, timeline, successor = await asyncio.gather(
            orbit.list_attempts(task_id, limit=50),
            _timeline(orbit, person, task_id),
            _successor(orbit, task),
        )
    context = await _summary_context(person, task, attempts, successor)
    context["timeline"] = timeline
    return await arender(request, "console/task_detail.html", context)


@require_GET
@console_view
async def task_recovery(request: HttpRequest, task_id: str) -> HttpResponse:
    """The task page's summary as the task is now — its title, facts, result, recovery panel,
    pending proposal and decisions — asked for again whole when the task moved or was noted
    (issue 30: one truth on the page)."""
    task_id = task_id_or_404(task_id)
    person: Person = request.person  # type: ignore[attr-defined]
    async with await task_client(request, task_id) as orbit:
        task = await orbit.get_task(task_id)
        attempts, successor = await asyncio.gather(
            orbit.list_attempts(task_id, limit=50), _successor(orbit, task)
        )
    context = await _summary_context(person, task, attempts, successor)
    return await arender(request, "console/task_detail.html#summary", context)


async def _summary_context(
    person: Person, task: Task, attempts: Any, successor: Task | None
) -> dict[str, Any]:
    submissions, pending = await sync_to_async(_console_decisions_of)(task.id)
    return {
        "task": task,
        "successor": successor,
        "attempts": attempts,
        "actions": [review_availability(task, person), retry_availability(task, person)],
        "submissions": submissions,
        "pending_proposal": pending,
        "read_only": person.read_only,
    }


@functools.cache
def _timeline_of() -> TimelineOf | None:
    return import_string(settings.CONSOLE_TASK_TIMELINE) if settings.CONSOLE_TASK_TIMELINE else None


async def _timeline(orbit: OrbitClient, person: Person, task_id: str) -> Any:
    timeline_of = _timeline_of()
    return None if timeline_of is None else await timeline_of(orbit, person, task_id)


async def _successor(orbit: OrbitClient, task: Task) -> Task | None:
    """The retry successor as it is now: what the retry led to (I2). It lies in the source's
    queue, so the same credential reads it; ``None`` when the API does not tell."""
    if not task.retry_successor_id:
        return None
    try:
        successor = await orbit.get_task(task.retry_successor_id)
    except (OrbitError, OutcomeUnknown):
        return None
    await sync_to_async(followup_observe)(successor)
    return successor


def _console_decisions_of(task_id: str) -> tuple[list[Submission], Proposal | None]:
    """The console's decisions on the task, newest first, and the proposal waiting for approval
    on it, if any (one live proposal per revision; the newest)."""
    submissions = list(
        Submission.objects.filter(task_id=task_id)
        .select_related("created_by", "sent_as", "followup")
        .order_by("-created_at")[:20]
    )
    pending = pending_proposal_on(task_id)
    return submissions, pending
