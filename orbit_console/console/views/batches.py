"""Batches (docs/bulk.md): select from the work queue, verify, decide, confirm; approve; watch
the progress live; export the outcomes. The rules live in ``decisions/batches.py``; these views
read the tasks as the person (the API's scope and permissions apply) and show the steps."""

import asyncio
import itertools
import json
from collections.abc import AsyncIterator, Iterator
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import (
    Http404,
    HttpRequest,
    HttpResponse,
    HttpResponseRedirect,
    QueryDict,
    StreamingHttpResponse,
)
from django.http.response import HttpResponseBase
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from orbit_console.client import OrbitClient, OrbitError
from orbit_console.console import forms as wizard_forms
from orbit_console.console.availability import recovery_mode
from orbit_console.console.views.common import NoCredentialError, arender, console_view
from orbit_console.console.views.drafts import keeps_draft, take_draft
from orbit_console.console.views.stepup import authenticated_of, step_up_detour
from orbit_console.decisions import batches
from orbit_console.decisions.models import Batch, BatchItem, BatchState, ItemOutcome
from orbit_console.decisions.proposals import ProposalRefused
from orbit_console.lib import csvcells
from orbit_console.lib.ids import is_id
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import SUPERVISOR, Person, orbit_client

# How many tasks the verify step shows to inspect, and how many the selection reads at once.
SAMPLE = 10
READERS = 8
LIST_PAGE = 100
DEFAULT_STATES = {"review": ("NEEDS_REVIEW",), "retry": ("FAILED", "CANCELLED")}
FILTER_NAMES = (
    "state",
    "queue_id",
    "handler",
    "business_key",
    "business_key_prefix",
    "error",
    "updated_after",
    "updated_before",
)


def _person(request: HttpRequest) -> Person:
    person: Person = request.person  # type: ignore[attr-defined]
    return person


async def _matching(orbit: OrbitClient, action: str, values: dict[str, Any]) -> list[str]:
    """Every task id the filter matches (all pages, not only the one shown), up to one past
    the limit so that a selection too large is refused rather than cut."""
    limit = settings.CONSOLE_BATCH_MAX_TASKS
    states = (values["state"],) if values.get("state") else DEFAULT_STATES[action]
    filters = {name: values.get(name) or None for name in FILTER_NAMES if name != "state"}
    found: list[str] = []
    cursor = None
    while len(found) <= limit:
        page = await orbit.list_tasks(states=states, limit=LIST_PAGE, cursor=cursor, **filters)
        found.extend(task.id for task in page.items)
        cursor = page.next_cursor
        if not cursor:
            break
    return found[: limit + 1]


async def _read_all(orbit: OrbitClient, task_ids: list[str]) -> list[batches.Seen]:
    """Each task as it is now (its revision is what the batch pins), a few at a time."""
    gate = asyncio.Semaphore(READERS)

    async def read(task_id: str) -> batches.Seen:
        async with gate:
            try:
                return batches.Seen(task_id, await orbit.get_task(task_id))
            except OrbitError as error:
                if error.status == 404:
                    return batches.Seen(task_id, None)
                raise

    return list(await asyncio.gather(*(read(task_id) for task_id in task_ids)))


def _filtered(person: Person, data: QueryDict) -> tuple[dict[str, Any], OrbitCredential]:
    """The work queue's filter in ``data`` (an invalid one filters nothing, as on the work
    queue), and the credential of its namespace (else the person's first)."""
    filters = wizard_forms.WorkQueueFilters(
        data, namespaces=[(c.namespace_id, c.namespace_label) for c in person.credentials]
    )
    values = filters.cleaned_data if filters.is_valid() else {}
    credential = person.credential_in(values.get("namespace") or "") or next(
        iter(person.credentials), None
    )
    if credential is None:
        raise NoCredentialError
    return values, credential


@require_GET
@console_view
async def batch_matching(request: HttpRequest) -> HttpResponse:
    """From the work queue's batch bar, before selecting: how many tasks "every task matching
    this filter" would take, for each action the person may take (at most one past the limit
    is counted: more is "over the limit")."""
    person = _person(request)
    values, credential = _filtered(person, request.GET)
    actions = [action for action in DEFAULT_STATES if recovery_mode(person, action)]
    if not actions:
        raise PermissionDenied
    async with orbit_client(credential) as orbit:
        found = await asyncio.gather(*(_matching(orbit, a, values) for a in actions))
    limit = settings.CONSOLE_BATCH_MAX_TASKS
    counts = [
        {"action": action, "count": len(ids), "over": len(ids) > limit}
        for action, ids in zip(actions, found, strict=True)
    ]
    return await arender(
        request, "console/partials/batch_matching.html", {"counts": counts, "limit": limit}
    )


@require_POST
@console_view
async def batch_new(request: HttpRequest) -> HttpResponse:
    """From the work queue: the ticked rows, or every task matching its filter."""
    person = _person(request)
    action = request.POST.get("action", "")
    if action not in DEFAULT_STATES:
        raise Http404
    if recovery_mode(person, action) is None:
        raise PermissionDenied
    values, credential = _filtered(person, request.POST)
    everything = request.POST.get("scope") == "all"
    ticked = [t for t in dict.fromkeys(request.POST.getlist("task")) if is_id(t)]
    back = reverse("console:work_queue")
    async with orbit_client(credential) as orbit:
        task_ids = await _matching(orbit, action, values) if everything else ticked
        if len(task_ids) > settings.CONSOLE_BATCH_MAX_TASKS:
            messages.error(
                request,
                _("A batch holds at most %(limit)s tasks; narrow the filter.")
                % {"limit": settings.CONSOLE_BATCH_MAX_TASKS},
            )
            return HttpResponseRedirect(back)
        seen = await _read_all(orbit, task_ids)
    if not any(entry.task for entry in seen):
        messages.error(request, _("None of the selected tasks can be read with your credential."))
        return HttpResponseRedirect(back)
    selection = {name: str(values.get(name) or "") for name in FILTER_NAMES}
    selection["scope"] = "all matching" if everything else "ticked rows"
    try:
        batch = await sync_to_async(batches.batch_create)(
            action=action,
            created_by=person.user,
            namespace_id=credential.namespace_id,
            selection=selection,
            seen=seen,
        )
    except ProposalRefused as refused:
        messages.error(request, str(refused))
        return HttpResponseRedirect(back)
    return HttpResponseRedirect(reverse("console:batch", args=[batch.id]))


def _visible(person: Person, batch_id: str) -> Batch:
    """The batch, if the person's credential of its namespace reads every one of its tasks
    (else 404, as for a task)."""
    if not is_id(batch_id):
        raise Http404
    batch = (
        batches.visible_batches(person.namespaces)
        .select_related("created_by", "decided_by", "sent_as")
        .filter(id=batch_id)
        .first()
    )
    if batch is None or not batches.seen_by(person, batch):
        raise Http404
    return batch


def _author(person: Person, batch: Batch) -> None:
    """Deciding and confirming a batch is its author's (403 for anyone else)."""
    if person.user.pk != batch.created_by_id:
        raise PermissionDenied


def _decide_form(batch: Batch, request: HttpRequest, data: Any = None) -> Any:
    if batch.action == "review":
        return wizard_forms.ReviewDecideForm(data)
    timeout = json.loads(batch.selection or "{}").get("max_attempt_timeout_ms", 1)
    return wizard_forms.RetryDecideForm(
        data,
        attempt_timeout_ms=timeout,
        zone=request.zone,  # type: ignore[attr-defined]
    )


def _page_context(person: Person, batch: Batch) -> dict[str, Any]:
    eligible, others = batches.breakdown(batch)
    items = batch.items.order_by("id")
    sample = list(items.filter(ineligible="")[:SAMPLE])
    left_out = list(items.exclude(ineligible="")[:SAMPLE])
    example = batches.item_body(batch, sample[0]) if batch.decision and sample else ""
    is_author = person.user.pk == batch.created_by_id
    approved_by_me = batch.approvals.filter(approver_id=person.user.pk).exists()
    return {
        "batch": batch,
        "eligible": eligible,
        "others": others,
        "labels": batches.INELIGIBLE,
        "sample": sample,
        "left_out": left_out,
        "example": example,
        "selection": json.loads(batch.selection or "{}"),
        "is_author": is_author,
        "may_decide": batch.state == BatchState.PROPOSED
        and not is_author
        and person.has_role(SUPERVISOR),
        "approved_by_me": approved_by_me,
        # Offered from the proposal on: the page shows each control live as the state allows.
        "may_steer": batch.state
        in (BatchState.PROPOSED, BatchState.STARTING, BatchState.RUNNING, BatchState.PAUSED)
        and (is_author or person.has_role(SUPERVISOR) or person.user.pk == batch.sent_as_id),
        "max_tasks": settings.CONSOLE_BATCH_MAX_TASKS,
        "approval_required": batches.approval_required(batch.action),
        **progress_context(batch),
    }


def progress_context(batch: Batch) -> dict[str, Any]:
    """What the progress fragment shows (also pushed live by console/consumers.py)."""
    progress = batches.progress(batch)
    recent = list(
        batch.items.exclude(outcome__in=["", ItemOutcome.SKIPPED])
        .order_by("-settled_at", "-id")
        .select_related("submission")[:20]
    )
    starting = batch.state == BatchState.STARTING
    eligible = batches.eligible_items(batch)
    return {
        "batch": batch,
        "approvals": batches.approvals_of(batch),
        "stored": eligible.filter(submission__isnull=False).count() if starting else 0,
        "to_store": eligible.count() if starting else 0,
        "progress": progress,
        "outcome_rows": [
            (key, label, progress.counts.get(key, 0))
            for key, label in ItemOutcome.choices
            if progress.counts.get(key)
        ],
        "waiting": progress.counts.get("", 0),
        "recent": recent,
    }


async def _render_page(
    request: HttpRequest, batch: Batch, *, form: Any = None, status: int = 200
) -> HttpResponse:
    person = _person(request)
    context = await sync_to_async(_page_context)(person, batch)
    if batch.state == BatchState.DRAFT and person.user.pk == batch.created_by_id:
        context["form"] = form or _decide_form(batch, request, _initial(batch))
    return await arender(request, "console/batch.html", context, status=status)


def _initial(batch: Batch) -> dict[str, Any] | None:
    """A decided draft shows its decision again in the form (to change it)."""
    decided = batch.decided
    if not decided or batch.action != "review":
        return None
    return {k: decided[k] for k in ("outcome", "result", "reason", "evidence_ref")}


@require_GET
@console_view
async def batch_detail(request: HttpRequest, batch_id: str) -> HttpResponse:
    batch = await sync_to_async(_visible)(_person(request), batch_id)
    # A decision typed before the session ended, back in its form (views/drafts.py).
    draft = await take_draft(request)
    if draft is not None and draft.posted_to == reverse("console:batch_decide", args=[batch.id]):
        restored = QueryDict(mutable=True)
        for name, value in draft.fields:
            restored.appendlist(name, value)
        return await _render_page(request, batch, form=_decide_form(batch, request, restored))
    return await _render_page(request, batch)


def _batch_page(request: HttpRequest, batch_id: str) -> str:
    return reverse("console:batch", args=[batch_id])


@require_POST
@console_view
@keeps_draft(_batch_page)
async def batch_decide_view(request: HttpRequest, batch_id: str) -> HttpResponse:
    person = _person(request)
    batch = await sync_to_async(_visible)(person, batch_id)
    _author(person, batch)
    form = _decide_form(batch, request, request.POST)
    if not form.is_valid():
        return await _render_page(request, batch, form=form, status=400)
    decision = batches.decision_fields(
        batch.action, form.cleaned_data, template=request.POST.get("template") == "on"
    )
    try:
        await sync_to_async(batches.batch_decide)(batch, person=person.user, decision=decision)
    except batches.ResultTooLarge as refused:
        form.add_error(refused.field, str(refused))
        return await _render_page(request, batch, form=form, status=400)
    except ProposalRefused as refused:
        messages.error(request, str(refused))
    return HttpResponseRedirect(reverse("console:batch", args=[batch.id]) + "#confirm")


@require_POST
@console_view
async def batch_confirm_view(request: HttpRequest, batch_id: str) -> HttpResponse:
    person = _person(request)
    batch = await sync_to_async(_visible)(person, batch_id)
    _author(person, batch)
    try:
        typed = int(request.POST.get("count", "").strip())
    except ValueError:
        typed = -1
    if request.POST.get("confirm") != "on":
        messages.error(request, _("Tick the confirmation to send the batch."))
        return HttpResponseRedirect(reverse("console:batch", args=[batch.id]) + "#confirm")
    try:
        batch = await sync_to_async(batches.batch_submit)(
            batch, person=person.user, typed_count=typed
        )
    except ProposalRefused as refused:
        messages.error(request, str(refused))
    await _store(batch)
    return HttpResponseRedirect(reverse("console:batch", args=[batch.id]))


async def _store(batch: Batch) -> None:
    """A batch that has just started: its submissions stored, a chunk per hop to the database
    thread (so that the process's other requests go on between chunks). If this request dies
    meanwhile, the batch stays starting and the worker stores the rest."""
    if batch.state != BatchState.STARTING:
        return
    while await sync_to_async(batches.batch_store_next)(batch_id=batch.id):
        pass


def _step(name: str) -> Any:
    """A POST that moves the batch (approve, reject, pause, resume, cancel)."""
    steps = {
        "approve": lambda b, p, r: batches.batch_approve(
            batch_id=b, approver=p, note=r.POST.get("note", ""), authenticated=r.orbit_auth
        ),
        "reject": lambda b, p, r: batches.batch_reject(
            batch_id=b, supervisor=p, reason=r.POST.get("reason", ""), authenticated=r.orbit_auth
        ),
        "pause": lambda b, p, r: batches.batch_pause(batch_id=b, person=p),
        "resume": lambda b, p, r: batches.batch_resume(batch_id=b, person=p),
        "cancel": lambda b, p, r: batches.batch_cancel(batch_id=b, person=p),
    }
    move = steps[name]
    supervisors_only = name in ("approve", "reject")

    @require_POST
    @console_view
    async def view(request: HttpRequest, batch_id: str) -> HttpResponse:
        person = _person(request)
        batch = await sync_to_async(_visible)(person, batch_id)
        steers = person.user.pk in (batch.created_by_id, batch.sent_as_id)
        if not person.has_role(SUPERVISOR) and (supervisors_only or not steers):
            raise PermissionDenied
        if supervisors_only:
            page = reverse("console:batch", args=[batch.id])
            if detour := await step_up_detour(request, resume_at=page):
                return detour
            request.orbit_auth = await authenticated_of(request)  # type: ignore[attr-defined]
        try:
            moved = await sync_to_async(move)(batch.id, person.user, request)
        except ProposalRefused as refused:
            messages.error(request, str(refused))
        else:
            if name == "approve" and moved.state == BatchState.PROPOSED:
                messages.success(
                    request, _("Approved; more approvals are needed before it is sent.")
                )
            await _store(moved)
        return HttpResponseRedirect(reverse("console:batch", args=[batch.id]))

    view.__name__ = f"batch_{name}"
    return view


batch_approve = _step("approve")
batch_reject = _step("reject")
batch_pause = _step("pause")
batch_resume = _step("resume")
batch_cancel = _step("cancel")

EXPORT_FIELDS = [
    "task_id",
    "queue_id",
    "business_key",
    "seen_state",
    "seen_revision",
    "eligible",
    "ineligible",
    "outcome",
    "error_code",
    "submission_id",
    "idempotency_key",
    "audit_id",
    "result_task_id",
    "settled_at",
]


def _export_rows(batch: Batch) -> Iterator[dict[str, str]]:
    items = BatchItem.objects.filter(batch=batch).select_related("submission").order_by("id")
    for item in items.iterator(chunk_size=500):
        submission = item.submission
        yield {
            "task_id": item.task_id,
            "queue_id": item.queue_id,
            "business_key": item.business_key,
            "seen_state": item.seen_state,
            "seen_revision": item.seen_revision,
            "eligible": "true" if item.eligible else "false",
            "ineligible": item.ineligible,
            "outcome": item.outcome,
            "error_code": item.error_code,
            "submission_id": submission.id if submission else "",
            "idempotency_key": submission.idempotency_key if submission else "",
            "audit_id": submission.audit_id if submission else "",
            "result_task_id": submission.result_task_id if submission else "",
            "settled_at": item.settled_at.isoformat() if item.settled_at else "",
        }


@require_GET
@console_view
async def batch_export(request: HttpRequest, batch_id: str, fmt: str) -> HttpResponseBase:
    """The items' outcomes, streamed: CSV or JSON Lines. The export is recorded first, as an
    export of the audit record is."""
    if fmt not in ("csv", "jsonl"):
        raise Http404
    person = _person(request)
    batch = await sync_to_async(_visible)(person, batch_id)
    await sync_to_async(batches.record_batch_export)(batch, actor=person.user, fmt=fmt)
    rows = _export_rows(batch)

    def lines() -> Iterator[str]:
        if fmt == "jsonl":
            for row in rows:
                yield json.dumps(row, ensure_ascii=False) + "\n"
            return
        yield csvcells.lines([EXPORT_FIELDS])
        for row in rows:
            yield csvcells.lines([[row[name] for name in EXPORT_FIELDS]])

    def some(chunks: Iterator[str]) -> str:
        """The next rows, a few hundred at a time: one trip to the database thread each."""
        return "".join(itertools.islice(chunks, 200))

    async def stream() -> AsyncIterator[str]:
        chunks = lines()
        while text := await sync_to_async(some)(chunks):
            yield text

    content_type = "text/csv" if fmt == "csv" else "application/x-ndjson"
    response = StreamingHttpResponse(stream(), content_type=f"{content_type}; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="batch-{batch.id}.{fmt}"'
    return response


@require_GET
@console_view
async def batch_list(request: HttpRequest) -> HttpResponse:
    person = _person(request)

    def recent() -> list[Batch]:
        query = batches.visible_batches(person.namespaces).select_related("created_by")
        return [b for b in query.order_by("-created_at")[:50] if batches.seen_by(person, b)]

    return await arender(
        request, "console/batches.html", {"batches": await sync_to_async(recent)()}
    )
