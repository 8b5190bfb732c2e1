"""Work in progress where people decide (issue 30): what waits for a supervisor's approval (the
navigation's count, the landing page, "Next waiting") and the marks of the work queue's rows
(a proposal pending; retried → what the new task became). Each is one bounded query for the
page, never one per row."""

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from django.db.models import Q, QuerySet
from django.utils import timezone

from orbit_console.decisions.batches import visible_batches
from orbit_console.decisions.models import (
    Batch,
    BatchState,
    Proposal,
    ProposalState,
    Submission,
    SubmissionAction,
    SubmissionState,
)
from orbit_console.decisions.proposals import visible_proposals
from orbit_console.people.accounts import accounts_of
from orbit_console.people.person import SUPERVISOR, Person


def proposals_waiting_for(person: Person) -> QuerySet[Proposal]:
    """Pending, unexpired proposals of the supervisor's namespaces that they may still approve:
    not their own, not already approved by them; oldest first."""
    return (
        visible_proposals(person)
        .filter(state=ProposalState.PENDING, expires_at__gt=timezone.now())
        .exclude(proposed_by_id__in=accounts_of(person.user.pk))
        .exclude(approvals__approver_id__in=accounts_of(person.user.pk))
        .order_by("created_at", "id")
    )


def batches_waiting_for(person: Person) -> QuerySet[Batch]:
    """As ``proposals_waiting_for``, for proposed batches."""
    return (
        visible_batches(person.namespaces)
        .filter(state=BatchState.PROPOSED)
        .exclude(created_by_id__in=accounts_of(person.user.pk))
        .exclude(approvals__approver_id__in=accounts_of(person.user.pk))
        .order_by("created_at", "id")
    )


def waiting_count(person: Person | None) -> int | None:
    """How many proposals and batches wait for this supervisor's approval (two counts); ``None``
    for a person who approves nothing. Counted by namespace: the approvals page then shows
    only those whose tasks one of their credentials reads."""
    if person is None or not person.has_role(SUPERVISOR):
        return None
    return proposals_waiting_for(person).count() + batches_waiting_for(person).count()


def next_waiting(person: Person, *, after: str = "") -> Proposal | None:
    """The oldest proposal still waiting for this supervisor, other than ``after``."""
    return proposals_waiting_for(person).exclude(id=after).select_related("proposed_by").first()


class Mark(Protocol):
    """A mark another app puts beside a row's state, shown by its own partial."""

    @property
    def template(self) -> str: ...


# The apps above the console that mark rows (insight: tasks waiting past their objective),
# each with one query for the whole page: given the tasks shown, the marks of those it marks.
RowMarker = Callable[[list[str]], Mapping[str, Mark]]
_markers: list[RowMarker] = []


def mark_rows_with(marker: RowMarker) -> None:
    """Register a marker of the work queue's rows (an app's ``ready``)."""
    if marker not in _markers:
        _markers.append(marker)


@dataclass(frozen=True)
class RowMarks:
    """What the work queue says beside a row's state."""

    pending: frozenset[str]  # tasks with a proposal waiting for approval
    retried: dict[str, tuple[str, str]]  # task → (its successor, the successor's state, or "")
    more: dict[str, list[Any]] = field(default_factory=dict)  # task → the markers' marks


def row_marks(task_ids: Iterable[str]) -> RowMarks:
    """The marks of the rows shown: two queries for the whole page, and one per marker."""
    shown = list(task_ids)
    if not shown:
        return RowMarks(frozenset(), {})
    pending = frozenset(
        Proposal.objects.filter(
            task_id__in=shown, state=ProposalState.PENDING, expires_at__gt=timezone.now()
        ).values_list("task_id", flat=True)
    )
    retries = (
        Submission.objects.filter(
            Q(task_id__in=shown),
            action=SubmissionAction.RETRY,
            state=SubmissionState.SUCCEEDED,
        )
        .exclude(result_task_id="")
        .select_related("followup")
        .order_by("created_at")
    )
    retried = {
        s.task_id: (s.result_task_id, getattr(getattr(s, "followup", None), "state", "") or "")
        for s in retries
    }
    more: dict[str, list[Any]] = {}
    for marker in _markers:
        for task_id, mark in marker(shown).items():
            more.setdefault(task_id, []).append(mark)
    return RowMarks(pending, retried, more)


def pending_proposal_on(task_id: str) -> Proposal | None:
    """The proposal waiting for approval on the task, if any (the newest; one per revision)."""
    return (
        Proposal.objects.filter(
            task_id=task_id, state=ProposalState.PENDING, expires_at__gt=timezone.now()
        )
        .select_related("proposed_by")
        .order_by("-created_at")
        .first()
    )
