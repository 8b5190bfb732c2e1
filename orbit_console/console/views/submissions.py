"""A submission's page — the receipt, or what happened and what to do next — and the resend."""

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect
from django.urls import reverse
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_POST

from orbit_console.client import OrbitError, OutcomeUnknown, Task
from orbit_console.console.views.common import (
    NoCredentialError,
    arender,
    console_view,
    set_aside_context,
    task_now,
)
from orbit_console.decisions.followups import followup_observe
from orbit_console.decisions.models import Approval, Batch, ConsoleEvent, FollowUp, Submission
from orbit_console.decisions.submissions import submission_send
from orbit_console.lib.ids import is_id
from orbit_console.people.access import require_task_read
from orbit_console.people.accounts import company_names
from orbit_console.people.person import Person


async def followed_now(
    request: HttpRequest, submission: Submission, current: Task | None
) -> tuple[FollowUp | None, Task | None]:
    """What the decision led to, as the API tells it now (I2): its follow-up, moved by this
    fresh read of the followed task (the decision's own task, read already as ``current``, or
    a retry's new task), and that task; the stored follow-up alone when the API does not
    answer."""
    followup = await FollowUp.objects.filter(submission_id=submission.id).afirst()
    if followup is None:
        return None, None
    followed = current
    if followup.task_id != submission.task_id:
        try:
            followed, _ = await task_now(request, followup.task_id)
        except (OrbitError, NoCredentialError):
            followed = None
    if followed is None or followed.id != followup.task_id:
        return followup, followed
    if await sync_to_async(followup_observe)(followed):
        followup = await FollowUp.objects.aget(submission_id=submission.id)
    return followup, followed


def _load(submission_id: str) -> tuple[Submission, list[ConsoleEvent]]:
    if not is_id(submission_id):
        raise Http404("no such submission")
    submission = (
        Submission.objects.select_related("created_by", "sent_as").filter(id=submission_id).first()
    )
    if submission is None:
        raise Http404("no such submission")
    events = list(submission.events.select_related("actor").order_by("created_at", "id"))
    return submission, events


def _origin(submission: Submission) -> dict[str, Any]:
    """Where the decision came from, for the page: its batch, and the supervisors whose
    approval sent it (of its proposal or its batch)."""
    batch = Batch.objects.filter(items__submission=submission).first()
    subject: dict[str, Any] = {"batch__items__submission": submission}
    if submission.proposal_id:
        subject = {"proposal_id": submission.proposal_id}
    approvers = list(
        Approval.objects.filter(**subject)
        .order_by("created_at", "id")
        .values_list("approver__username", flat=True)
    )
    return {"batch": batch, "approved_by": approvers, "company": company_names(approvers)}


@require_GET
@console_view
async def submission_detail(request: HttpRequest, submission_id: str) -> HttpResponse:
    submission, events = await sync_to_async(_load)(submission_id)
    person: Person = request.person  # type: ignore[attr-defined]
    read = await _require_access(person, submission)
    current, current_error = await task_now(request, submission.task_id, read=read)
    followup, followed = await followed_now(request, submission, current)
    context = {
        "submission": submission,
        "events": events,
        **await sync_to_async(_origin)(submission),
        "current": current,
        "current_error": current_error,
        "followup": followup,
        "followed": followed,
        "can_resend": _can_resend(person, submission),
        **await set_aside_context(
            request,
            submission.id,
            action=submission.action,
            standing_body=submission.body,
            standing_by=submission.created_by.get_username(),
            task_id=submission.task_id,
            revision=submission.expected_revision,
        ),
    }
    return await arender(request, "console/submission.html", context)


async def _require_access(person: Person, submission: Submission) -> Task | None:
    """The rule of console/access.py, with one exception for an API that does not answer: the
    people who made or sent a decision still see it, and may send it again (docs/access.md).
    The task, when the check has just read it."""
    try:
        _, read = await require_task_read(person, submission.task_id, what="submission")
    except OutcomeUnknown:
        if person.user.pk not in (submission.created_by_id, submission.sent_as_id):
            raise
        return None
    return read


def _can_resend(person: Person, submission: Submission) -> bool:
    return submission.is_open and not person.read_only and submission.sent_as_id == person.user.pk


@require_POST
@console_view
async def submission_resend(request: HttpRequest, submission_id: str) -> HttpResponse:
    """Send the identical stored request again (same key, same body, C9)."""
    submission, _events = await sync_to_async(_load)(submission_id)
    person: Person = request.person  # type: ignore[attr-defined]
    await _require_access(person, submission)
    if person.read_only or submission.sent_as_id != person.user.pk:
        raise PermissionDenied
    if submission.is_open:
        await submission_send(submission, actor=request.user)  # type: ignore[arg-type]
    else:
        messages.info(request, _("This submission already has a definite answer."))
    return HttpResponseRedirect(reverse("console:submission", args=[submission.id]), status=303)
