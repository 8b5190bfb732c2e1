"""Four eyes: the supervisors' approvals queue, a proposal's page, and its decisions."""

import asyncio
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.html import format_html
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from orbit_console.client import Task
from orbit_console.console.views.common import (
    arender,
    console_view,
    requires_role,
    set_aside_context,
    task_now,
)
from orbit_console.console.views.drafts import keeps_draft, take_draft
from orbit_console.console.views.stepup import authenticated_of, step_up_detour
from orbit_console.console.waiting import next_waiting, waiting_count
from orbit_console.decisions.batches import awaiting_approval
from orbit_console.decisions.models import (
    ConsoleEvent,
    Proposal,
    ProposalState,
    Submission,
    SubmissionState,
)
from orbit_console.decisions.proposals import (
    ProposalRefused,
    proposal_approve,
    proposal_reject,
    proposal_withdraw,
    visible_proposals,
)
from orbit_console.decisions.submissions import submission_send
from orbit_console.lib.ids import is_id
from orbit_console.people.access import can_read_task, require_task_access, require_task_read
from orbit_console.people.accounts import accounts_of, mark_company, shown_name
from orbit_console.people.person import SUPERVISOR, Person

RECENT = 20


@require_GET
@console_view
@requires_role(SUPERVISOR)
async def approvals_queue(request: HttpRequest) -> HttpResponse:
    person: Person = request.person  # type: ignore[attr-defined]
    pending, recent = await sync_to_async(_queue)(person)
    readable = await _readable_tasks(person, {p.task_id for p in [*pending, *recent]})
    context = {
        "pending": [p for p in pending if p.task_id in readable],
        "recent": [p for p in recent if p.task_id in readable],
        "pending_batches": await sync_to_async(_batches)(person),
        "viewer_ids": await sync_to_async(accounts_of)(person.user.pk),
    }
    template = "console/approvals.html#rows" if request.htmx else "console/approvals.html"  # type: ignore[attr-defined]
    return await arender(request, template, context)


def _queue(person: Person) -> tuple[list[Any], list[Proposal]]:
    proposals = visible_proposals(person).select_related("proposed_by", "decided_by")
    pending = list(
        proposals.filter(state=ProposalState.PENDING)
        .annotate(approved=Count("approvals"))
        .order_by("created_at")
    )
    decided = proposals.exclude(state=ProposalState.PENDING).select_related("submission")
    recent = list(decided.order_by("-decided_at")[:RECENT])
    mark_company([p.proposed_by for p in pending] + [p.decided_by for p in recent])
    return pending, recent


def _batches(person: Person) -> list[Any]:
    waiting = awaiting_approval(person)
    mark_company(batch.created_by for batch in waiting)
    return waiting


async def _readable_tasks(person: Person, task_ids: set[str]) -> set[str]:
    """Those of ``task_ids`` one of the person's credentials can read (console/access.py)."""
    ordered = sorted(task_ids)
    answers = await asyncio.gather(*(can_read_task(person, task_id) for task_id in ordered))
    return {task_id for task_id, readable in zip(ordered, answers, strict=True) if readable}


def _load(proposal_id: str) -> tuple[Proposal, list[ConsoleEvent], Submission | None]:
    if not is_id(proposal_id):
        raise Http404("no such proposal")
    proposal = (
        Proposal.objects.select_related("proposed_by", "decided_by").filter(id=proposal_id).first()
    )
    if proposal is None:
        raise Http404("no such proposal")
    submission = Submission.objects.filter(proposal=proposal).first()
    events = ConsoleEvent.objects.filter(proposal=proposal).select_related("actor")
    approvals = list(proposal.approvals.select_related("approver").order_by("created_at"))
    proposal.approval_list = approvals  # type: ignore[attr-defined]
    events_read = list(events.order_by("created_at", "id"))
    mark_company(
        [proposal.proposed_by, proposal.decided_by]
        + [a.approver for a in approvals]
        + [e.actor for e in events_read]
    )
    return proposal, events_read, submission


@require_GET
@console_view
async def proposal_detail(request: HttpRequest, proposal_id: str) -> HttpResponse:
    proposal, events, submission = await sync_to_async(_load)(proposal_id)
    person: Person = request.person  # type: ignore[attr-defined]
    mine = await sync_to_async(accounts_of)(person.user.pk)
    _, read = await require_task_read(person, proposal.task_id, what="proposal")
    current, current_error = await task_now(request, proposal.task_id, read=read)
    applied = submission is not None and submission.state == SubmissionState.SUCCEEDED
    # Once its own submission is applied, the task moved because of it: only later moves by
    # others are worth a warning.
    if submission is not None and applied:
        drift = _moved_since_applied(proposal, submission, current)
    else:
        drift = _drift(proposal, current)
    context = {
        **await _restored(request, proposal, person, mine),
        **await _field_error(request, proposal.id),
        "proposal": proposal,
        "events": events,
        "submission": submission,
        "current": current,
        "current_error": current_error,
        "drift": drift,
        "applied": applied,
        "can_decide": proposal.is_pending
        and person.has_role(SUPERVISOR)
        and proposal.proposed_by_id not in mine,
        "can_withdraw": proposal.is_pending and person.user.pk == proposal.proposed_by_id,
        "approved_by_me": any(a.approver_id in mine for a in proposal.approval_list),  # type: ignore[attr-defined]
        **await set_aside_context(
            request,
            proposal.id,
            action=proposal.action,
            standing_body=proposal.body,
            standing_by=proposal.proposed_by.get_username(),
            task_id=proposal.task_id,
            revision=proposal.expected_revision,
        ),
    }
    return await arender(request, "console/proposal.html", context)


async def _restored(
    request: HttpRequest, proposal: Proposal, person: Person, mine: frozenset[int]
) -> dict[str, str]:
    """A note or a reason typed before the session ended, back in its field after signing in
    (views/drafts.py); if the proposal was decided meanwhile, the page says what was typed."""
    draft = await take_draft(request)
    if draft is None:
        return {}
    fields = dict(draft.fields)
    if draft.posted_to == reverse("console:proposal_approve", args=[proposal.id]):
        name, text = "restored_note", fields.get("note", "")
    elif draft.posted_to == reverse("console:proposal_reject", args=[proposal.id]):
        name, text = "restored_reason", fields.get("reason", "")
    else:
        return {}
    may_decide = (
        proposal.is_pending and person.has_role(SUPERVISOR) and proposal.proposed_by_id not in mine
    )
    if not text:
        return {}
    if may_decide:
        messages.info(
            request,
            _("You were signed out before this was sent. What you typed is here again."),
        )
        return {name: text}
    messages.warning(
        request,
        _(
            "You were signed out before this was sent, and the proposal has been decided "
            "since. What you typed: %(text)s"
        )
        % {"text": text},
    )
    return {}


def _drift(proposal: Proposal, current: Task | None) -> list[str]:
    """What moved on the task since the proposal was made (a stale proposal will be refused)."""
    if current is None:
        return []
    warnings = []
    if current.revision != proposal.expected_revision:
        warnings.append(
            _("The task is now at revision %(now)s; the proposal was made at revision %(then)s.")
            % {"now": current.revision, "then": proposal.expected_revision}
        )
    expected_state = "NEEDS_REVIEW" if proposal.action == "review" else None
    if expected_state and current.state != expected_state:
        warnings.append(_("The task is now %(state)s.") % {"state": current.state})
    if proposal.action == "retry" and current.state not in ("FAILED", "CANCELLED"):
        warnings.append(_("The task is now %(state)s.") % {"state": current.state})
    if proposal.action == "retry" and current.retry_successor_id:
        warnings.append(_("The task already has a retry successor."))
    return warnings


def _moved_since_applied(
    proposal: Proposal, submission: Submission, current: Task | None
) -> list[str]:
    """What others did to the task after this proposal's own submission was applied. The
    submission moved it itself: a review to the next revision (RV5), a retry to a successor,
    the source's revision unchanged (RT9)."""
    if current is None:
        return []
    own_revision = int(proposal.expected_revision) + (1 if proposal.action == "review" else 0)
    warnings = []
    if int(current.revision) != own_revision:
        warnings.append(
            _("The task is now at revision %(now)s; this decision left it at revision %(then)s.")
            % {"now": current.revision, "then": own_revision}
        )
    own_successor = submission.result_task_id or None
    if current.retry_successor_id and current.retry_successor_id != own_successor:
        warnings.append(
            _("Someone has retried the task since: its successor is %(successor)s.")
            % {"successor": current.retry_successor_id}
        )
    return warnings


def _proposal_page(request: HttpRequest, proposal_id: str) -> str:
    return reverse("console:proposal", args=[proposal_id])


@require_POST
@console_view
@keeps_draft(_proposal_page)
async def proposal_approve_view(request: HttpRequest, proposal_id: str) -> HttpResponse:
    person: Person = request.person  # type: ignore[attr-defined]
    if not person.has_role(SUPERVISOR):
        raise PermissionDenied
    note = request.POST.get("note", "")
    await _require_proposal_access(person, proposal_id)
    if (refused := await _refused_text(request, proposal_id, "note", note)) is not None:
        return refused
    if detour := await step_up_detour(request, resume_at=_proposal_page(request, proposal_id)):
        return detour
    try:
        submission = await sync_to_async(proposal_approve)(
            proposal_id=proposal_id,
            approver=person.user,  # type: ignore[arg-type]
            note=note,
            authenticated=await authenticated_of(request),
        )
    except Proposal.DoesNotExist:
        raise Http404("no such proposal") from None
    except ProposalRefused as refused:
        messages.error(request, str(refused))
        return _back(proposal_id)
    if submission is None:
        messages.success(request, _("Approved; more approvals are needed before it is sent."))
        await _tell_next_waiting(request, person, proposal_id)
        return _back(proposal_id)
    submission = await submission_send(submission, actor=person.user)  # type: ignore[arg-type]
    await _tell_next_waiting(request, person, proposal_id)
    return HttpResponseRedirect(reverse("console:submission", args=[submission.id]), status=303)


@require_POST
@console_view
@keeps_draft(_proposal_page)
async def proposal_reject_view(request: HttpRequest, proposal_id: str) -> HttpResponse:
    person: Person = request.person  # type: ignore[attr-defined]
    if not person.has_role(SUPERVISOR):
        raise PermissionDenied
    await _require_proposal_access(person, proposal_id)
    reason = request.POST.get("reason", "")
    if (refused := await _refused_text(request, proposal_id, "reason", reason)) is not None:
        return refused
    if detour := await step_up_detour(request, resume_at=_proposal_page(request, proposal_id)):
        return detour
    try:
        await sync_to_async(proposal_reject)(
            proposal_id=proposal_id,
            supervisor=person.user,  # type: ignore[arg-type]
            reason=reason,
            authenticated=await authenticated_of(request),
        )
    except Proposal.DoesNotExist:
        raise Http404("no such proposal") from None
    except ProposalRefused as refused:
        messages.error(request, str(refused))
        return _back(proposal_id)
    await _tell_next_waiting(request, person, proposal_id)
    return _back(proposal_id)


@require_POST
@console_view
async def proposal_withdraw_view(request: HttpRequest, proposal_id: str) -> HttpResponse:
    person: Person = request.person  # type: ignore[attr-defined]
    if person.read_only:
        raise PermissionDenied
    await _require_proposal_access(person, proposal_id)
    try:
        await sync_to_async(proposal_withdraw)(
            proposal_id=proposal_id,
            person=person.user,  # type: ignore[arg-type]
        )
    except Proposal.DoesNotExist:
        raise Http404("no such proposal") from None
    except ProposalRefused as refused:
        messages.error(request, str(refused))
    return _back(proposal_id)


async def _require_proposal_access(person: Person, proposal_id: str) -> None:
    """Every decision on a proposal (approve, reject, withdraw) is taken only by a person whose
    credential can read its task: otherwise 404, and the proposal stays untouched."""
    proposal = (
        await Proposal.objects.filter(id=proposal_id).afirst() if is_id(proposal_id) else None
    )
    if proposal is None:
        raise Http404("no such proposal")
    await require_task_access(person, proposal.task_id, what="proposal")


MAX_NOTE_CHARS = 1024
_FIELD_ERROR = "orbit.proposal_field_error"


async def _refused_text(
    request: HttpRequest, proposal_id: str, field: str, text: str
) -> HttpResponse | None:
    """A note or a reason that cannot be taken is refused at its field, never cut (a paste of
    2 000 characters was silently cut to 1 024) and never told in a banner away from it: the
    page shows it again, with what is wrong under it (``_field_error``)."""
    if field == "reason" and not text.strip():
        error = _("Say why the proposal is rejected: a reason of spaces alone says nothing.")
    elif len(text) > MAX_NOTE_CHARS:
        error = _("%(over)s characters too many: nothing was cut, shorten the text to %(max)s.") % {
            "over": len(text) - MAX_NOTE_CHARS,
            "max": MAX_NOTE_CHARS,
        }
    else:
        return None
    await request.session.aset(
        _FIELD_ERROR,
        {
            "proposal": proposal_id,
            "field": field,
            "error": error,
            "text": text,
        },
    )
    return _back(proposal_id)


async def _field_error(request: HttpRequest, proposal_id: str) -> dict[str, str]:
    """The refusal ``_refused_text`` kept for this proposal's page, once: the field's text
    back in it, and the error under it."""
    kept = await request.session.apop(_FIELD_ERROR, None)
    if not isinstance(kept, dict) or kept.get("proposal") != proposal_id:
        return {}
    field = kept["field"]
    return {f"restored_{field}": kept["text"], f"{field}_error": kept["error"]}


async def _tell_next_waiting(request: HttpRequest, person: Person, decided: str) -> None:
    """After deciding a proposal, the supervisor is told which one waits next (issue 30)."""
    following = await sync_to_async(next_waiting)(person, after=decided)
    if following is not None:  # read here: naming a person may ask the database
        await sync_to_async(mark_company)([following.proposed_by])
    if following is None:
        messages.info(request, _("Next waiting: none left — no other proposal waits for you."))
        return
    label = _("%(action)s of %(task)s, proposed by %(who)s") % {
        "action": following.get_action_display(),
        "task": following.task_id[:8],
        "who": shown_name(following.proposed_by),
    }
    messages.info(
        request,
        format_html(
            '{} <a id="next-waiting" href="{}">{}</a>',
            _("Next waiting:"),
            reverse("console:proposal", args=[following.id]),
            label,
        ),
    )


@require_GET
@console_view
async def approvals_waiting(request: HttpRequest) -> HttpResponse:
    """The navigation's count of what waits for this supervisor's approval, asked for again
    when the approvals feed says something moved (base.html)."""
    person: Person = request.person  # type: ignore[attr-defined]
    count = await sync_to_async(waiting_count)(person)
    return await arender(request, "console/partials/nav_waiting.html", {"waiting_count": count})


def _back(proposal_id: str) -> HttpResponse:
    return HttpResponseRedirect(reverse("console:proposal", args=[proposal_id]), status=303)
