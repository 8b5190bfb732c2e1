"""What the console records of each decision, for the insight figures (docs/insight.md).

Told of every entry appended to the console's record, inside the transaction that appends it
(``decisions.submissions.listen_to_records``): the fact of the decision moves with the act, and
so do its rollups — a decision rolled back leaves no count, and each entry is appended once, so
nothing is counted twice. An entry moves at most one decision (a batch's own entries, the
batch) and the task's period of waiting:

- ``proposal.proposed``: made, pending approval; its task's waiting ends at its start;
- ``submission.stored``: approved (a proposal's), or made and confirmed (sent without
  approval, or one task's part of a batch);
- ``submission.receipt``: applied — declared SUCCEEDED or FAILED, or retried; the task no
  longer waits;
- ``submission.rejected``: refused by the recovery API;
- ``proposal.rejected`` / ``withdrawn`` / ``expired``: its proposal's end;
- ``submission.followed``: a retry's new task ended (SUCCEEDED, FAILED, CANCELLED, or
  NEEDS_REVIEW again);
- ``batch.*``: the batch's steps; ``batch.cancelled`` cancels its tasks' decisions not sent.
"""

import json
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from functools import lru_cache
from typing import Any

from orbit_console.decisions.evidence import evidence_link
from orbit_console.decisions.models import (
    Batch,
    BatchState,
    ConsoleEvent,
    FollowUp,
    Proposal,
    Submission,
    SubmissionState,
)
from orbit_console.insight import tallies
from orbit_console.insight.models import (
    EVIDENCE_CHARS,
    HANDLER_CHARS,
    SETTLED,
    BatchApproval,
    BatchFact,
    DecisionFact,
    Outcome,
    WaitEnd,
    WaitKind,
    WaitOrigin,
)
from orbit_console.insight.waiting import (
    Waiting,
    changed,
    wait_decision_started,
    wait_end,
)
from orbit_console.lib.rows import Rows


def on_record(event: ConsoleEvent) -> None:
    """Move what ``event`` moves (a no-op for the entries insight does not count)."""
    handle = _HANDLERS.get(event.kind)
    if handle is not None:
        handle(event)


# --- Decisions --------------------------------------------------------------------------------


# Plain SQL over the facts' table (lib/rows.py): a batch's chunk records hundreds at once.
FACTS = Rows(DecisionFact)
_FACT_FIELDS = [field.name for field in DecisionFact._meta.concrete_fields if not field.primary_key]


def _move(fact_id: str, change: Callable[[DecisionFact], bool]) -> DecisionFact | None:
    """Lock the decision's fact, let ``change`` move it (``False``: nothing changed), and move
    the rollups by what it now adds minus what it added."""
    fact = FACTS.one("id = %s", [fact_id], for_update=True)
    if fact is None:
        return None
    before = tallies.of_decision(fact)
    if not change(fact):
        return fact
    FACTS.update(fact, _FACT_FIELDS)
    tallies.moved(before, tallies.of_decision(fact))
    changed(fact.namespace_id)
    return fact


def _create(fact: DecisionFact) -> DecisionFact:
    FACTS.insert(fact)
    tallies.moved(Counter(), tallies.of_decision(fact))
    changed(fact.namespace_id)
    return fact


def _body(text: str) -> dict[str, Any]:
    try:
        found = json.loads(text)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def _new_fact(
    fact_id: str,
    subject: Proposal | Submission,
    *,
    decided: dict[str, Any],
    decided_by_id: int | None,
    recorded_at: datetime,
    links: bool | None = None,
) -> DecisionFact:
    """The fact of a decision made now, from its proposal or submission: what it was made on
    (``DecidedOn``) and what was decided (``decided``: the request's body, or the batch's)."""
    reason = decided.get("reason")
    evidence = decided.get("evidence_ref")
    evidence = evidence if isinstance(evidence, str) else ""
    if links is None:
        links = bool(evidence and evidence_link(subject.namespace_id, evidence))
    declared = decided.get("outcome") if subject.action == "review" else ""
    return DecisionFact(
        id=fact_id,
        namespace_id=subject.namespace_id,
        queue_id=subject.queue_id,
        task_id=subject.task_id,
        revision=int(subject.expected_revision),
        action=subject.action,
        declared=declared if isinstance(declared, str) else "",
        handler=subject.handler[:HANDLER_CHARS],
        error_code=subject.last_error_code,
        reason=reason if isinstance(reason, str) else "",
        evidence_ref=evidence[:EVIDENCE_CHARS],
        evidence_links=links,
        decided_by_id=decided_by_id,
        waiting_since=subject.waiting_since,
        started_at=subject.started_at,
        recorded_at=recorded_at,
        outcome=Outcome.SENDING,
    )


def _started(fact: DecisionFact) -> None:
    """The decision's task waited until the decision started: its first decision's start is
    kept on its period, which is opened from what the decider saw if no source told of it —
    unless since when it waited is not known (a decision made before the console kept it, an
    Orbit that does not say): then its waiting is counted only if a source told of it."""
    start = fact.started_at or fact.confirmed_at
    if start is None:
        return
    seen = Waiting(
        namespace_id=fact.namespace_id,
        task_id=fact.task_id,
        revision=fact.revision,
        kind=WaitKind.REVIEW if fact.action == "review" else WaitKind.RETRY,
        entered_at=fact.waiting_since or start,
        origin=WaitOrigin.DECISION,
        queue_id=fact.queue_id,
        handler=fact.handler,
        error_code=fact.error_code,
    )
    wait = wait_decision_started(
        seen, started_at=start, open_if_untold=fact.waiting_since is not None
    )
    if wait is not None and not fact.error_code and wait.error_code:
        fact.error_code = wait.error_code


def _proposed(event: ConsoleEvent) -> None:
    proposal = event.proposal
    assert proposal is not None  # noqa: S101 -- a proposal's entry
    fact = _new_fact(
        proposal.id,
        proposal,
        decided=_body(proposal.body),
        decided_by_id=proposal.proposed_by_id,
        recorded_at=event.created_at,
    )
    fact.proposal_id = proposal.id
    fact.proposed_at = event.created_at
    fact.outcome = Outcome.PENDING
    _started(fact)
    _create(fact)


def _proposal_closed(outcome: str) -> Callable[[ConsoleEvent], None]:
    def close(event: ConsoleEvent) -> None:
        proposal = event.proposal
        assert proposal is not None  # noqa: S101 -- a proposal's entry
        _settle(proposal.id, proposal.decided_at or event.created_at, outcome)

    return close


def _stored(event: ConsoleEvent) -> None:
    submission = event.submission
    assert submission is not None  # noqa: S101 -- a submission's entry
    if submission.proposal_id:
        proposal = submission.proposal
        assert proposal is not None  # noqa: S101

        def approved(fact: DecisionFact) -> bool:
            if fact.outcome != Outcome.PENDING:
                return False
            fact.submission_id = submission.id
            fact.approved_at = proposal.decided_at or event.created_at
            fact.approved_by_id = proposal.decided_by_id
            fact.stored_at = event.created_at
            fact.outcome = Outcome.SENDING
            return True

        _move(proposal.id, approved)
        return
    batch = event.batch
    decided = batch.decided if batch is not None else _body(submission.body)
    links = _batch_links(batch) if batch is not None else None
    fact = _new_fact(
        submission.id,
        submission,
        decided=decided,
        decided_by_id=submission.created_by_id,
        recorded_at=event.created_at,
        links=links,
    )
    fact.submission_id = submission.id
    fact.stored_at = event.created_at
    if batch is not None:
        # One task's part of the batch's decision: the batch's proposal, approval and clocks
        # are the batch's (``BatchFact``), counted once; who approved it is kept for precedent.
        fact.batch_id = batch.id
        fact.approved_by_id = batch.decided_by_id
        _batch_confirmed(batch, event.created_at)
    _started(fact)
    _create(fact)


def _fact_of(submission: Submission) -> str:
    return submission.proposal_id or submission.id


def _settle(
    fact_id: str,
    at: datetime,
    outcome: str | Callable[[DecisionFact], str],
    *,
    applied: bool = False,
    successor: str = "",
) -> DecisionFact | None:
    """The decision reached its final ``outcome`` (or the one ``outcome`` gives it) ``at``;
    nothing changes for one that had (the first definite answer stands)."""

    def change(fact: DecisionFact) -> bool:
        if fact.outcome in SETTLED:
            return False
        fact.outcome = outcome(fact) if callable(outcome) else outcome
        fact.settled_at = at
        if applied:
            fact.applied_at = at
        if successor:
            fact.successor_task_id = successor
        return True

    return _move(fact_id, change)


def _as_applied(fact: DecisionFact) -> str:
    if fact.action == "retry":
        return Outcome.RETRIED
    return Outcome.FAILED if fact.declared == "FAILED" else Outcome.SUCCEEDED


def _applied(event: ConsoleEvent) -> None:
    submission = event.submission
    assert submission is not None  # noqa: S101 -- a submission's entry
    at = submission.resolved_at or event.created_at
    fact = _settle(
        _fact_of(submission),
        at,
        _as_applied,
        applied=True,
        successor=submission.result_task_id,
    )
    if fact is not None and fact.applied_at is not None:
        # The task no longer waits: reviewed, or retried (the stream may have said so first).
        end = WaitEnd.REVIEWED if fact.action == "review" else WaitEnd.RETRIED
        wait_end(
            task_id=fact.task_id,
            ended_at=fact.applied_at,
            end=end,
            below_revision=fact.revision + 1,
        )


def _refused(event: ConsoleEvent) -> None:
    submission = event.submission
    assert submission is not None  # noqa: S101 -- a submission's entry
    _settle(_fact_of(submission), submission.resolved_at or event.created_at, Outcome.REFUSED)


def _followed(event: ConsoleEvent) -> None:
    submission = event.submission
    assert submission is not None  # noqa: S101 -- a submission's entry
    if submission.action != "retry":
        return
    followup = FollowUp.objects.filter(submission_id=submission.id).first()
    if followup is None or followup.ended_at is None:
        return

    def change(fact: DecisionFact) -> bool:
        if fact.successor_ended_at is not None:
            return False
        fact.successor_task_id = fact.successor_task_id or followup.task_id
        fact.successor_state = followup.state
        fact.successor_ended_at = followup.ended_at
        return True

    _move(_fact_of(submission), change)


# --- Batches ----------------------------------------------------------------------------------


def _move_batch(batch: Batch, change: Callable[[BatchFact], bool]) -> BatchFact | None:
    fact = BatchFact.objects.select_for_update().filter(id=batch.id).first()
    if fact is None:
        return None  # selected before the console kept insight's facts
    before = tallies.of_batch(fact)
    if change(fact):
        fact.save()
        tallies.moved(before, tallies.of_batch(fact))
        changed(fact.namespace_id)
    return fact


def _batch_selected(event: ConsoleEvent) -> None:
    batch = event.batch
    assert batch is not None  # noqa: S101 -- a batch's entry
    fact = BatchFact(
        id=batch.id,
        namespace_id=batch.namespace_id,
        action=batch.action,
        tasks=batch.items.filter(ineligible="").count(),
        selected_at=batch.created_at,
    )
    fact.save(force_insert=True)
    tallies.moved(Counter(), tallies.of_batch(fact))
    changed(fact.namespace_id)


def _batch_confirmed(batch: Batch, moment: datetime) -> None:
    """A batch sent without approval is confirmed when its first task's decision is stored
    (the confirm step stores the first chunk at once). One conditional statement per task:
    only the first finds the batch unconfirmed."""
    confirmed = BatchFact.objects.filter(id=batch.id, confirmed_at__isnull=True)
    if not confirmed.update(confirmed_at=moment):
        return
    fact = BatchFact.objects.get(id=batch.id)
    before = tallies.of_batch(BatchFact(**{**_fields(fact), "confirmed_at": None}))
    tallies.moved(before, tallies.of_batch(fact))
    changed(fact.namespace_id)


def _fields(fact: BatchFact) -> dict[str, Any]:
    return {
        field.attname: getattr(fact, field.attname) for field in BatchFact._meta.concrete_fields
    }


@lru_cache(maxsize=64)
def _links_of(batch_id: str, namespace_id: str, evidence: str) -> bool:
    return bool(evidence and evidence_link(namespace_id, evidence))


def _batch_links(batch: Batch) -> bool:
    """Whether the batch's evidence reference links: one look at the namespace's policy per
    batch, as its decision was made once for all its tasks."""
    evidence = batch.decided.get("evidence_ref")
    return _links_of(batch.id, batch.namespace_id, evidence if isinstance(evidence, str) else "")


def _batch_proposed(event: ConsoleEvent) -> None:
    def change(fact: BatchFact) -> bool:
        if fact.proposed_at is not None:
            return False
        fact.proposed_at = fact.confirmed_at = event.created_at
        return True

    assert event.batch is not None  # noqa: S101
    _move_batch(event.batch, change)


def _batch_decided(approval: str) -> Callable[[ConsoleEvent], None]:
    def decided(event: ConsoleEvent) -> None:
        batch = event.batch
        assert batch is not None  # noqa: S101

        def change(fact: BatchFact) -> bool:
            if fact.approval:
                return False
            fact.approval = approval
            fact.decided_at = batch.decided_at or batch.finished_at or event.created_at
            return True

        _move_batch(batch, change)

    return decided


def _batch_started(event: ConsoleEvent) -> None:
    batch = event.batch
    assert batch is not None  # noqa: S101

    def change(fact: BatchFact) -> bool:
        if fact.started_at is not None:
            return False
        fact.started_at = batch.started_at or event.created_at
        fact.confirmed_at = fact.confirmed_at or fact.started_at
        if fact.proposed_at is not None and not fact.approval:
            fact.approval = BatchApproval.APPROVED
            fact.decided_at = batch.decided_at or fact.started_at
        return True

    _move_batch(batch, change)


def _batch_cancelled(event: ConsoleEvent) -> None:
    """The tasks' decisions not sent are cancelled (their submissions closed in bulk)."""
    batch = event.batch
    assert batch is not None  # noqa: S101
    cancelled = Submission.objects.filter(
        batch_item__batch=batch, state=SubmissionState.CANCELLED
    ).values_list("id", flat=True)
    for submission_id in sorted(cancelled):
        _settle(submission_id, event.created_at, Outcome.CANCELLED)


def _batch_finished(event: ConsoleEvent) -> None:
    batch = event.batch
    assert batch is not None  # noqa: S101
    state = Batch.objects.filter(id=batch.id).values_list("state", flat=True).first()

    def change(fact: BatchFact) -> bool:
        if fact.end:
            return False
        fact.end = "cancelled" if state == BatchState.CANCELLED else "finished"
        fact.finished_at = event.created_at
        return True

    _move_batch(batch, change)


_HANDLERS: dict[str, Callable[[ConsoleEvent], None]] = {
    "proposal.proposed": _proposed,
    "proposal.rejected": _proposal_closed(Outcome.REJECTED),
    "proposal.withdrawn": _proposal_closed(Outcome.WITHDRAWN),
    "proposal.expired": _proposal_closed(Outcome.EXPIRED),
    "submission.stored": _stored,
    "submission.receipt": _applied,
    "submission.rejected": _refused,
    "submission.followed": _followed,
    "batch.selected": _batch_selected,
    "batch.proposed": _batch_proposed,
    "batch.rejected": _batch_decided(BatchApproval.REJECTED),
    "batch.expired": _batch_decided(BatchApproval.EXPIRED),
    "batch.discarded": _batch_decided(BatchApproval.DISCARDED),
    "batch.started": _batch_started,
    "batch.cancelled": _batch_cancelled,
    "batch.finished": _batch_finished,
}
