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
from orbit_console.people.accounts import accounts_of
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import SUPERVISOR, Person, orbit_client

# How many tasks the verify step shows to inspect, and how many the selection reads at once.
SAMPLE = 10
READERS = 8
LIST_PAGE = 100
DEFAULT_STATES = {"review": ("NEEDS_REVIEW",), "retry": ("FAILED", "CANCELLED")}
# What "every task matching" counted, kept in the session (the latest count only, up to this
# many ids) so that the freeze names the tasks that stopped matching meanwhile, and why; a
# larger count is explained by its number only. At most STOPPED_READ of them are read again.
COUNTED = "orbit.batch.counted"
COUNTED_KEPT = 1000
STOPPED_READ = 50
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


def _action_states(action: str, values: dict[str, Any]) -> tuple[str, ...]:
    """The states the filter selects that ``action`` may take: a filter on NEEDS_REVIEW offers
    no retry (issue 30), and no filter takes every state the action may take."""
    states = DEFAULT_STATES[action]
    chosen = values.get("state")
    return tuple(state for state in states if state == chosen) if chosen else states


async def _matching(orbit: OrbitClient, action: str, values: dict[str, Any]) -> list[str]:
    """Every task id the filter matches (all pages, not only the one shown) that is eligible
    for ``action`` as far as the list tells (its state; for a retry, an effect that is not
    uncertain: RV1, RT1), up to one past the limit so that a selection too large is refused
    rather than cut. The freeze reads each task and says why any of them is left out."""
    limit = settings.CONSOLE_BATCH_MAX_TASKS
    states = _action_states(action, values)
    if not states:
        return []
    filters = {name: values.get(name) or None for name in FILTER_NAMES if name != "state"}
    found: list[str] = []
    cursor = None
    while len(found) <= limit:
        page = await orbit.list_tasks(states=states, limit=LIST_PAGE, cursor=cursor, **filters)
        found.extend(
            task.id for task in page.items if not (action == "retry" and task.effect_uncertain)
        )
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


def _filter_key(values: dict[str, Any]) -> str:
    """The filter, as one comparable string (a count is of one filter)."""
    return json.dumps(
        {name: str(values.get(name) or "") for name in ("namespace", *FILTER_NAMES)},
        sort_keys=True,
    )


async def _stopped(
    orbit: OrbitClient, action: str, values: dict[str, Any], gone: list[str]
) -> dict[str, Any]:
    """Why each counted task that the freeze no longer found matching stopped matching, read
    again now: {reason: {"count": n, "tasks": [[id, state], ...]}} (reasons: ``not_found``,
    ``state``, ``effect_uncertain``, ``filter``: its other fields changed; ``unread``: more
    than ``STOPPED_READ`` of them)."""
    states = _action_states(action, values)
    found: dict[str, Any] = {}

    def add(reason: str, task_id: str, state: str) -> None:
        entry = found.setdefault(reason, {"count": 0, "tasks": []})
        entry["count"] += 1
        if len(entry["tasks"]) < SAMPLE:
            entry["tasks"].append([task_id, state])

    for seen in await _read_all(orbit, gone[:STOPPED_READ]):
        task = seen.task
        if task is None:
            add("not_found", seen.task_id, "")
        elif task.state not in states:
            add("state", task.id, task.state)
        elif action == "retry" and task.effect_uncertain:
            add("effect_uncertain", task.id, task.state)
        else:
            add("filter", task.id, task.state)
    for task_id in gone[STOPPED_READ:]:
        add("unread", task_id, "")
    return found


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
    """From the work queue's batch bar: how many tasks "every task matching this filter" would
    take, for each action the person may take (at most one past the limit is counted: more is
    "over the limit"), and the batch buttons that fit: none for an action with nothing to take
    or too much, its reason shown instead. ``scope=ticked`` gives every button back."""
    person = _person(request)
    values, credential = _filtered(person, request.GET)
    actions = [action for action in DEFAULT_STATES if recovery_mode(person, action)]
    if not actions:
        raise PermissionDenied
    limit = settings.CONSOLE_BATCH_MAX_TASKS
    counts: list[dict[str, Any]]
    if request.GET.get("scope") == "ticked":
        counts = [{"action": action, "count": None, "over": False} for action in actions]
        await request.session.apop(COUNTED, None)
    else:
        async with orbit_client(credential) as orbit:
            found = await asyncio.gather(*(_matching(orbit, a, values) for a in actions))
        counts = [
            {"action": action, "count": len(ids), "over": len(ids) > limit}
            for action, ids in zip(actions, found, strict=True)
        ]
        kept = {a: ids for a, ids in zip(actions, found, strict=True) if len(ids) <= COUNTED_KEPT}
        await request.session.aset(COUNTED, {"filter": _filter_key(values), "ids": kept})
    return await arender(
        request,
        "console/partials/batch_matching.html",
        {"counts": counts, "limit": limit, "ticked": request.GET.get("scope") == "ticked"},
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
        if everything and not task_ids:
            messages.error(request, _("No task matching this filter can take this action."))
            return HttpResponseRedirect(back)
        seen = await _read_all(orbit, task_ids)
        stopped = None
        counted_ids = await _counted_ids(request, action, values) if everything else None
        if counted_ids is not None:
            now = set(task_ids)
            gone = [task_id for task_id in counted_ids if task_id not in now]
            stopped = await _stopped(orbit, action, values, gone)
    if not any(entry.task for entry in seen):
        messages.error(request, _("None of the selected tasks can be read with your credential."))
        return HttpResponseRedirect(back)
    selection: dict[str, Any] = {name: str(values.get(name) or "") for name in FILTER_NAMES}
    selection["scope"] = "all matching" if everything else "ticked rows"
    counted = request.POST.get(f"counted_{action}", "")
    if everything and counted.isdigit() and len(counted) <= 6:
        # What the offer counted, so that the batch page explains any difference (issue 30).
        selection["counted"] = int(counted)
        if stopped is not None and counted_ids is not None and len(counted_ids) == int(counted):
            selection["stopped"] = stopped
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


async def _counted_ids(
    request: HttpRequest, action: str, values: dict[str, Any]
) -> list[str] | None:
    """The ids the latest count of this very filter found for ``action`` (taken: a count
    explains one freeze), or ``None``."""
    kept = await request.session.apop(COUNTED, None)
    if not isinstance(kept, dict) or kept.get("filter") != _filter_key(values):
        return None
    ids = kept.get("ids", {}).get(action)
    return [str(task_id) for task_id in ids] if isinstance(ids, list) else None


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


def _verify_form(batch: Batch, data: Any = None) -> Any:
    form_class = (
        wizard_forms.BatchReviewVerifyForm
        if batch.action == "review"
        else wizard_forms.BatchRetryVerifyForm
    )
    return form_class(data)


def _focus_first_error(form: Any) -> None:
    """The keyboard (and the view) lands on the first field to fix, as in the single wizard:
    the page is not left at its top."""
    if form is None or not form.is_bound:
        return
    wrong = next((name for name in form.fields if name in form.errors), None)
    if wrong is not None:
        form.fields[wrong].widget.attrs["autofocus"] = True


# The steps a batch goes through, and which one it is at (the single wizard's step pills).
def _steps(batch: Batch, approval_required: bool) -> tuple[list[str], int]:
    names = [_("Verify"), _("Decide"), _("Confirm")]
    if approval_required or batch.required_approvals:
        names.append(_("Approval"))
    names.append(_("Sending"))
    approval = 3 if len(names) == 5 else None
    state = batch.state
    if state == BatchState.DRAFT:
        index = 0 if batch.verified_at is None else 1 if not batch.decision else 2
    elif state in (BatchState.PROPOSED, BatchState.REJECTED):
        index = approval if approval is not None else 2
    elif state == BatchState.DISCARDED:
        index = -1  # none is current: it ended before it was sent
    elif state == BatchState.FINISHED or (state == BatchState.CANCELLED and batch.finished_at):
        index = len(names)
    else:
        index = len(names) - 1
    return [str(name) for name in names], index


def _page_context(person: Person, batch: Batch) -> dict[str, Any]:
    eligible, others = batches.breakdown(batch)
    items = batch.items.order_by("id")
    sample = list(items.filter(ineligible="")[:SAMPLE])
    left_out = list(items.exclude(ineligible="")[:SAMPLE])
    example = batches.item_body(batch, sample[0]) if batch.decision and sample else ""
    is_author = person.user.pk == batch.created_by_id
    mine = accounts_of(person.user.pk)
    approved_by_me = batch.approvals.filter(approver_id__in=mine).exists()
    approval_required = batches.approval_required(batch.action)
    never_sent = batch.state == BatchState.DRAFT or (
        batch.state == BatchState.PROPOSED and not batch.approvals.exists()
    )
    return {
        "batch": batch,
        "eligible": eligible,
        "others": others,
        "labels": batches.INELIGIBLE,
        "sample": sample,
        "left_out": left_out,
        "example": example,
        "selection": json.loads(batch.selection or "{}"),
        "count_change": batches.count_change(batch),
        "is_author": is_author,
        "may_decide": batch.state == BatchState.PROPOSED
        and batch.created_by_id not in mine
        and person.has_role(SUPERVISOR),
        "approved_by_me": approved_by_me,
        # Offered from the proposal on: the page shows each control live as the state allows.
        "may_steer": batch.state
        in (BatchState.PROPOSED, BatchState.STARTING, BatchState.RUNNING, BatchState.PAUSED)
        and (is_author or person.has_role(SUPERVISOR) or person.user.pk == batch.sent_as_id),
        "may_discard": is_author and never_sent,
        "max_tasks": settings.CONSOLE_BATCH_MAX_TASKS,
        "approval_required": approval_required,
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
    step_names, step_index = _steps(batch, batches.approval_required(batch.action))
    return {
        "batch": batch,
        # The step pills, pushed with the progress: the page never shows an old step.
        "steps": [{"title": name} for name in step_names],
        "step_index": step_index,
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
        # Settled and on their way mean something only once it is being sent (issue 30).
        "sending": batch.state
        in (
            BatchState.STARTING,
            BatchState.RUNNING,
            BatchState.PAUSED,
            BatchState.CANCELLED,
            BatchState.FINISHED,
        ),
        "to_send": progress.total - progress.counts.get(ItemOutcome.SKIPPED, 0),
        "left_out_count": progress.counts.get(ItemOutcome.SKIPPED, 0),
        "recent": recent,
    }


async def _render_page(
    request: HttpRequest,
    batch: Batch,
    *,
    form: Any = None,
    verify_form: Any = None,
    confirm_form: Any = None,
    status: int = 200,
) -> HttpResponse:
    """The batch's page. A form given is bound with what the person sent (and its mistakes):
    it is shown as they left it, focused at the first mistake."""
    person = _person(request)
    context = await sync_to_async(_page_context)(person, batch)
    draft = batch.state == BatchState.DRAFT and person.user.pk == batch.created_by_id
    if draft and context["eligible"]:
        if batch.verified_at is None:
            context["verify_form"] = verify_form or _verify_form(batch)
        else:
            context["form"] = form or _decide_form(batch, request, _initial(batch))
        if batch.decision:
            context["confirm_form"] = confirm_form or wizard_forms.BatchConfirmForm(
                eligible=context["eligible"]
            )
    for each in (form, verify_form, confirm_form):
        _focus_first_error(each)
    return await arender(request, "console/batch.html", context, status=status)


def _initial(batch: Batch) -> dict[str, Any] | None:
    """A decided draft shows its decision again in the form (to change it)."""
    decided = batch.decided
    if not decided or batch.action != "review":
        return None
    initial = {k: decided[k] for k in ("outcome", "result", "reason", "evidence_ref")}
    return initial | {"result": decided.get("result_text") or decided["result"]}


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
async def batch_verify_view(request: HttpRequest, batch_id: str) -> HttpResponse:
    """The verify checklist: every box ticked opens the decide step."""
    person = _person(request)
    batch = await sync_to_async(_visible)(person, batch_id)
    _author(person, batch)
    form = _verify_form(batch, request.POST)
    if not form.is_valid():
        return await _render_page(request, batch, verify_form=form, status=400)
    try:
        await sync_to_async(batches.batch_verify)(batch, person=person.user)
    except ProposalRefused as refused:
        messages.error(request, str(refused))
        return HttpResponseRedirect(reverse("console:batch", args=[batch.id]))
    return HttpResponseRedirect(reverse("console:batch", args=[batch.id]) + "#decide")


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
        batch.action,
        form.cleaned_data,
        template=request.POST.get("template") == "on",
        result_text=request.POST.get("result", ""),
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
    """The count typed back and the confirmation: a mistake is told at its field, on the page
    as the person left it (nothing cleared, focused there), not in a banner at the top."""
    person = _person(request)
    batch = await sync_to_async(_visible)(person, batch_id)
    _author(person, batch)
    here = reverse("console:batch", args=[batch.id])
    # Not a mistake of this form: the step is not open (said as the service says it).
    if batch.state != BatchState.DRAFT:
        messages.error(
            request,
            _("This batch is %(state)s: that step is not open.")
            % {"state": batch.get_state_display()},
        )
        return HttpResponseRedirect(here)
    if not batch.decision:
        messages.error(request, _("Decide first."))
        return HttpResponseRedirect(here)
    eligible = await sync_to_async(lambda: batches.eligible_items(batch).count())()
    form = wizard_forms.BatchConfirmForm(request.POST, eligible=eligible)
    if not form.is_valid():
        return await _render_page(request, batch, confirm_form=form, status=400)
    try:
        batch = await sync_to_async(batches.batch_submit)(
            batch, person=person.user, typed_count=form.cleaned_data["count"]
        )
    except ProposalRefused as refused:
        form.add_error(None, str(refused))
        return await _render_page(request, batch, confirm_form=form, status=400)
    await _store(batch)
    return HttpResponseRedirect(here)


@require_POST
@console_view
async def batch_discard_view(request: HttpRequest, batch_id: str) -> HttpResponse:
    """Its author discards a batch never sent (a draft, or a proposal nobody approved)."""
    person = _person(request)
    batch = await sync_to_async(_visible)(person, batch_id)
    _author(person, batch)
    try:
        await sync_to_async(batches.batch_discard)(batch_id=batch.id, person=person.user)
    except ProposalRefused as refused:
        messages.error(request, str(refused))
    else:
        messages.success(request, _("The batch is discarded: nothing of it was sent."))
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
