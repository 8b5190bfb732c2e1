"""``/decisions``: the person's own decisions, newest first, each with what it led to (I2) —
the follow-up of an applied one, live over ``/ws/decisions`` (``console/consumers.py``)."""

from asgiref.sync import sync_to_async
from django.contrib.auth.models import User
from django.db.models import Count, Q
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from orbit_console.console.views.common import arender, console_view
from orbit_console.decisions.models import (
    Batch,
    BatchState,
    Proposal,
    ProposalState,
    Submission,
)
from orbit_console.lib.ids import is_id
from orbit_console.lib.keyset import older_than
from orbit_console.people.person import Person

PAGE = 25


def decisions_of(user: User, *, after: str = "") -> tuple[list[Submission], str]:
    """A page of the decisions ``user`` made, newest first, from after the decision ``after``;
    and the id to ask the next page from ("" on the last)."""
    mine = Submission.objects.filter(created_by=user)
    if is_id(after):
        last = mine.filter(id=after).values_list("created_at", "id").first()
        if last is not None:
            mine = mine.filter(older_than(*last))
    rows = list(
        mine.select_related("followup", "sent_as", "batch_item").order_by("-created_at", "-id")[
            : PAGE + 1
        ]
    )
    return rows[:PAGE], rows[PAGE - 1].id if len(rows) > PAGE else ""


def waiting_of(user: User) -> tuple[list[Proposal], list[Batch]]:
    """The person's proposals and batches still waiting for approval, newest first (issue 30:
    work in progress is listed where its author looks)."""
    proposals: list[Proposal] = list(
        Proposal.objects.filter(
            proposed_by=user, state=ProposalState.PENDING, expires_at__gt=timezone.now()
        )
        .annotate(approved=Count("approvals"))
        .order_by("-created_at")[:PAGE]
    )
    batches: list[Batch] = list(
        Batch.objects.filter(created_by=user, state=BatchState.PROPOSED)
        .annotate(
            eligible=Count("items", filter=Q(items__ineligible=""), distinct=True),
            approved=Count("approvals", distinct=True),
        )
        .order_by("-created_at")[:PAGE]
    )
    return proposals, batches


@require_GET
@console_view
async def my_decisions(request: HttpRequest) -> HttpResponse:
    person: Person = request.person  # type: ignore[attr-defined]
    after = request.GET.get("after", "")
    rows, next_after = await sync_to_async(decisions_of)(person.user, after=after)
    proposals, batches = await sync_to_async(waiting_of)(person.user)
    return await arender(
        request,
        "console/decisions.html",
        {
            "rows": rows,
            "next_after": next_after,
            "paged": bool(after),
            "waiting_proposals": proposals,
            "waiting_batches": batches,
        },
    )
