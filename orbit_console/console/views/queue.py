"""The work queue: tasks that need a person, NEEDS_REVIEW first, then FAILED and CANCELLED."""

import asyncio
from dataclasses import dataclass
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db.models import Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.utils import timezone
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET
from django.views.decorators.vary import vary_on_headers

from orbit_console.client import OrbitError, Page, TaskSummary
from orbit_console.console.availability import recovery_mode
from orbit_console.console.consumers import rows_token
from orbit_console.console.forms import FindTask, WorkQueueFilters
from orbit_console.console.views.common import (
    NoCredentialError,
    arender,
    console_view,
    task_client,
)
from orbit_console.console.waiting import row_marks, waiting_count
from orbit_console.decisions.models import OPEN_STATES, Proposal, ProposalState, Submission
from orbit_console.people.person import AUDITOR, Person, orbit_client

PAGE_SIZE = 25


@dataclass
class Section:
    key: str
    title: str
    states: tuple[str, ...]
    page: Page[TaskSummary]
    cursor: str | None
    first_url: str
    next_url: str | None
    prev_url: str | None
    # Oldest first ("…_asc"): the next page holds newer tasks, the one before older ones.
    ascending: bool


def _page_url(request: HttpRequest, key: str | None = None, cursor: str | None = None) -> str:
    """This page's URL with the same filters, at the first page of every section, or at
    ``cursor`` in section ``key``."""
    query = request.GET.copy()
    for name in list(query):
        if name.startswith("cursor_") or name == "find":
            del query[name]
    if key is not None and cursor is not None:
        query[f"cursor_{key}"] = cursor
    return f"{request.path}?{query.urlencode()}" if query else request.path


@require_GET
@vary_on_headers("HX-Request")  # the fragment and the page share a URL (hx-push-url)
@console_view
async def work_queue(request: HttpRequest) -> HttpResponse:
    person: Person = request.person  # type: ignore[attr-defined]
    find = FindTask(request.GET) if "find" in request.GET else FindTask()
    if find.is_bound and find.is_valid():
        task_id = find.cleaned_data["find"]
        if await _readable(request, task_id):
            return redirect("console:task", task_id)
        find.add_error(
            "find",
            _(
                "No task %(id)s that you may read: it does not exist, or it is outside "
                "your namespaces and queues."
            )
            % {"id": task_id},
        )
    filters = WorkQueueFilters(
        request.GET or None,
        namespaces=[(c.namespace_id, c.namespace_label) for c in person.credentials],
    )
    values = filters.cleaned_data if filters.is_valid() else {}
    # One namespace at a time: the chosen one, else the first the person holds a credential in.
    credential = person.credential_in(values.get("namespace") or "") or next(
        iter(person.credentials), None
    )
    if credential is None:
        raise NoCredentialError
    layout: list[tuple[str, str, tuple[str, ...]]]
    if values.get("state"):
        layout = [("list", values["state"], (values["state"],))]
    else:
        layout = [
            ("review", _("Needs review"), ("NEEDS_REVIEW",)),
            ("terminal", _("Failed or cancelled"), ("FAILED", "CANCELLED")),
        ]
    async with orbit_client(credential) as orbit:
        pages = await asyncio.gather(
            *(
                orbit.list_tasks(
                    states=states,
                    queue_id=values.get("queue_id") or None,
                    handler=values.get("handler") or None,
                    business_key=values.get("business_key") or None,
                    business_key_prefix=values.get("business_key_prefix") or None,
                    error=values.get("error") or None,
                    updated_after=values.get("updated_after"),
                    updated_before=values.get("updated_before"),
                    limit=PAGE_SIZE,
                    cursor=request.GET.get(f"cursor_{key}") or None,
                    order=values.get("order") or None,
                    count=True,
                )
                for key, _title, states in layout
            )
        )
    sections = [
        Section(
            key=key,
            title=title,
            states=states,
            page=page,
            cursor=request.GET.get(f"cursor_{key}"),
            first_url=_page_url(request),
            next_url=_page_url(request, key, page.next_cursor) if page.next_cursor else None,
            # Back to the first page: its own URL, without a cursor (the same page, plainly).
            prev_url=_page_url(request, key, page.prev_cursor) if page.prev_cursor else None,
            ascending=(values.get("order") or "").endswith("_asc"),
        )
        for (key, title, states), page in zip(layout, pages, strict=True)
    ]
    shown = [task.id for section in sections for task in section.page.items]
    open_submissions, own_proposals = await sync_to_async(_own_decisions)(request)
    marks = await sync_to_async(row_marks)(shown)
    context = {
        "find": find,
        "filters": filters,
        "sections": sections,
        "open_submissions": open_submissions,
        "own_proposals": own_proposals,
        "marks": marks,
        # The rows' socket follows these tasks (console/consumers.QueueRowsConsumer).
        "rows_token": rows_token(person.user.pk, shown) if shown else "",
        # Batches (docs/bulk.md): which actions the selection bar offers this person.
        "batch_actions": [a for a in ("review", "retry") if recovery_mode(person, a)],
        "batch_buttons": [
            {"action": a, "count": None, "over": False}
            for a in ("review", "retry")
            if recovery_mode(person, a)
        ],
        "max_tasks": settings.CONSOLE_BATCH_MAX_TASKS,
    }
    template = "console/work_queue.html#results" if request.htmx else "console/work_queue.html"  # type: ignore[attr-defined]
    return await arender(request, template, context)


async def _readable(request: HttpRequest, task_id: str) -> bool:
    """Whether the person may read the task: the API's own answer, with the credential the task
    page would use (a task they may not read looks as absent as one that does not exist, C4)."""
    try:
        async with await task_client(request, task_id) as orbit:
            await orbit.get_task(task_id)
    except Http404:
        return False
    except OrbitError as error:
        if error.status in (403, 404):
            return False
        raise
    return True


# How long a decided proposal stays in its proposer's box, saying how it was decided (issue 15:
# a rejected one used to vanish without a word).
DECIDED_SHOWN_FOR = timedelta(hours=24)


def _own_decisions(request: HttpRequest) -> tuple[list[Submission], list[Proposal]]:
    """The person's decisions still waiting for a definite answer, and their proposals: the
    pending ones and those decided in the last ``DECIDED_SHOWN_FOR``, with how."""
    submissions = list(
        Submission.objects.filter(sent_as_id=request.user.pk, state__in=OPEN_STATES).order_by(
            "-created_at"
        )[:20]
    )
    recent = Q(state=ProposalState.PENDING) | Q(decided_at__gte=timezone.now() - DECIDED_SHOWN_FOR)
    proposals = list(
        Proposal.objects.filter(recent, proposed_by_id=request.user.pk)
        .select_related("decided_by")
        .order_by("-created_at")[:20]
    )
    return submissions, proposals


@require_GET
@console_view
async def start(request: HttpRequest) -> HttpResponse:
    """Where signing in lands (issue 30; docs/console.md "What each role sees where"): a
    supervisor with proposals or batches waiting for their approval on the approvals page, an
    auditor who decides nothing on the audit explorer, everyone else on the work queue."""
    person: Person = request.person  # type: ignore[attr-defined]
    if await sync_to_async(waiting_count)(person):
        return redirect("console:approvals")
    if person.read_only and person.has_role(AUDITOR):
        return redirect("console:audit")
    return redirect("console:work_queue")
