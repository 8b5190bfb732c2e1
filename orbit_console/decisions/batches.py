"""Batches: one evidenced decision over many tasks, sent exactly once per task (docs/bulk.md).

A batch moves through the same three steps as one task's decision:

- **select and verify** (``batch_create``): the tasks and the revision each was seen at are
  frozen in ``BatchItem`` rows, each eligible or not, with why not (``INELIGIBLE``);
- **decide** (``batch_decide``): one reason and one evidence reference for the batch, and a
  review's outcome and result (one for all, or a template filled in with each task's fields)
  or a retry's budget;
- **confirm** (``batch_submit``): the count typed back. Under the approval policy the batch is
  one proposal (``batch_approve``, four eyes, never by its author: the same ``Approval`` records
  and the same number of approvers as a single decision's); otherwise it starts at once.

Each filled-in request is checked against the API's limits before anything is kept
(``too_large``). Starting stores one durable submission per eligible task — its own idempotency
key, its pinned revision, its exact body — in chunks of ``CONSOLE_BATCH_START_CHUNK``, each
its own short transaction (``batch_store``), while the batch is ``starting``; only when every
one is stored does it become ``running``, and only then does the worker
(``decisions/batchworker.py``) send any. A start cut short (a crash) is resumed by the worker.
"""

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.template.defaultfilters import filesizeformat
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from orbit_console.client import RetryTaskRequest, ReviewTaskRequest, Task
from orbit_console.decisions.evidence import matches as evidence_matches
from orbit_console.decisions.evidence import policy_for
from orbit_console.decisions.models import (
    Approval,
    Batch,
    BatchItem,
    BatchState,
    ItemOutcome,
    Submission,
    SubmissionState,
)
from orbit_console.decisions.proposals import APPROVALS_GROUP, ProposalRefused, refuse_own
from orbit_console.decisions.submissions import (
    Authenticated,
    DecidedOn,
    record_event,
    submission_create,
    waiting_since,
)
from orbit_console.lib import strictjson
from orbit_console.lib.live import publish_on_commit
from orbit_console.lib.recovery_rules import MAX_RESULT_BYTES
from orbit_console.lib.rfc3339 import format_utc, parse_utc
from orbit_console.people.person import SUPERVISOR, Person

BATCH_APPROVALS_MESSAGE = "approvals.batch"
BATCH_MESSAGE = "batch.progress"

# Why a task cannot be part of a batch's decision (RV1, RV2, RT1, RT6). The API checks
# everything again when each item is sent.
INELIGIBLE = {
    "not_found": gettext_lazy("Not found (or no longer yours to read)"),
    "state": gettext_lazy("Wrong state for this action"),
    "effect_uncertain": gettext_lazy("Effect uncertain: review it, do not retry it"),
    "owned": gettext_lazy("Owned by a workflow or plan"),
    "gated": gettext_lazy("Held by a gate"),
    "successor": gettext_lazy("A retry successor exists"),
    "executing": gettext_lazy("Still leased, running or holding a permit"),
}

# Why a counted task was no longer among those frozen (read again at the freeze, issue 30).
STOPPED_MATCHING = {
    "not_found": gettext_lazy("Not found any more (or no longer yours to read)"),
    "state": gettext_lazy("Its state changed: this action no longer takes it"),
    "effect_uncertain": gettext_lazy("Its effect became uncertain: review it, do not retry it"),
    "filter": gettext_lazy("Its fields changed: it no longer matches the filter"),
    "unread": gettext_lazy("Not read again (too many to read)"),
}

# The task fields a review's result template may name: "{{business_key}}" in any string.
TEMPLATE_FIELDS = ("id", "queue_id", "handler", "business_key", "revision")


def batch_group(batch_id: str) -> str:
    return f"batch.{batch_id}"


def ineligibility(task: Task, action: str) -> str:
    """Why ``task`` cannot take ``action`` now (a key of ``INELIGIBLE``), or "" if it can."""
    executing = task.leased or task.active_attempt or task.unreleased_permit
    if action == "review":
        if task.state != "NEEDS_REVIEW":
            return "state"
        if task.owner_kind == "WORKFLOW":
            return "owned"
        if task.gated:
            return "gated"
        return "executing" if executing else ""
    if task.state not in ("FAILED", "CANCELLED"):
        return "state"
    if task.owner_kind in ("WORKFLOW", "PLAN"):
        return "owned"
    if task.gated:
        return "gated"
    if task.effect_uncertain:
        return "effect_uncertain"
    if task.retry_successor_id:
        return "successor"
    return "executing" if executing else ""


@dataclass(frozen=True)
class Seen:
    """A task of the selection as the verify step read it (``task`` None: the API said 404)."""

    task_id: str
    task: Task | None


def batch_create(
    *, action: str, created_by: User, namespace_id: str, selection: dict[str, Any], seen: list[Seen]
) -> Batch:
    """Freeze a selection: every task with the revision it was seen at and whether it is
    eligible. Refuses more than ``CONSOLE_BATCH_MAX_TASKS`` tasks and an empty selection."""
    limit = settings.CONSOLE_BATCH_MAX_TASKS
    if not seen:
        raise ProposalRefused(_("Nothing is selected."))
    if len(seen) > limit:
        raise ProposalRefused(
            _("A batch holds at most %(limit)s tasks; this selection has more.") % {"limit": limit}
        )
    timeouts = [s.task.retry.attempt_timeout_ms for s in seen if s.task and s.task.retry]
    now = timezone.now()
    with transaction.atomic():
        batch = Batch.objects.create(
            action=action,
            namespace_id=namespace_id,
            selection=json.dumps(
                {**selection, "max_attempt_timeout_ms": max(timeouts, default=1)}, sort_keys=True
            ),
            created_by=created_by,
            created_at=now,
        )
        BatchItem.objects.bulk_create(
            [_item(batch, entry, action) for entry in seen], batch_size=500
        )
        record_event("batch.selected", batch=batch, actor=created_by, now=now)
    return batch


def _item(batch: Batch, entry: Seen, action: str) -> BatchItem:
    task = entry.task
    if task is None:
        # Left out like any ineligible task, and so settled from the start: an item without an
        # outcome is one the worker still waits for, and it would wait for ever.
        return BatchItem(
            batch=batch,
            task_id=entry.task_id,
            seen_state="",
            ineligible="not_found",
            outcome=ItemOutcome.SKIPPED,
        )
    reason = ineligibility(task, action)
    return BatchItem(
        batch=batch,
        task_id=task.id,
        queue_id=task.queue_id,
        handler=task.handler,
        business_key=task.business_key or "",
        seen_state=task.state,
        seen_revision=task.revision,
        waiting_since=waiting_since(task),
        ineligible=reason,
        outcome=ItemOutcome.SKIPPED if reason else "",
    )


def breakdown(batch: Batch) -> tuple[int, list[tuple[str, str, int]]]:
    """The eligible count, and (reason, label, count) for the others, largest first."""
    counts = dict(
        batch.items.values_list("ineligible").annotate(n=Count("id")).values_list("ineligible", "n")
    )
    eligible = counts.pop("", 0)
    others = sorted(
        ((key, str(INELIGIBLE.get(key, key)), n) for key, n in counts.items()),
        key=lambda row: -row[2],
    )
    return eligible, others


def eligible_items(batch: Batch) -> QuerySet[BatchItem]:
    return batch.items.filter(ineligible="").order_by("id")


def awaiting_approval(person: Person) -> list[Batch]:
    """The proposed batches a supervisor sees, oldest first, each with its ``eligible`` count
    (the approvals queue, docs/bulk.md)."""
    query = (
        visible_batches(person.namespaces)
        .filter(state=BatchState.PROPOSED)
        .select_related("created_by")
        .annotate(
            eligible=Count("items", filter=Q(items__ineligible=""), distinct=True),
            approved=Count("approvals", distinct=True),
        )
        .order_by("created_at")
    )
    return [batch for batch in query if seen_by(person, batch)]


def approvals_of(batch: Batch) -> list[Approval]:
    """The batch's approvals so far, oldest first, with their approvers."""
    return list(batch.approvals.select_related("approver").order_by("created_at", "id"))


# --- The decision -------------------------------------------------------------------------------


class ResultTooLarge(ProposalRefused):
    """Filled in for one of the tasks, the result is larger than the API takes: the decide
    form shows this at the result."""

    field = "result"


def batch_verify(batch: Batch, *, person: User) -> Batch:
    """The verify step's checklist, ticked by the batch's author (``batch.verified``): as for a
    single task, the decide step opens only after it. A batch with no eligible task has nothing
    to verify: it can only be discarded."""
    with transaction.atomic():
        locked = _locked_draft(batch.id, person)
        _require_eligible(locked)
        if locked.verified_at is None:
            now = timezone.now()
            locked.verified_at = now
            locked.save(update_fields=["verified_at"])
            record_event("batch.verified", batch=locked, actor=person, now=now)
    return locked


def _require_eligible(batch: Batch) -> None:
    if not eligible_items(batch).exists():
        raise ProposalRefused(
            _("No task of this batch is eligible: there is nothing to decide. Discard it.")
        )


def batch_discard(*, batch_id: str, person: User) -> Batch:
    """Its author gives up a batch that was never sent: a draft, or a proposal that no
    supervisor has approved yet (an approval already given would be thrown away behind the
    approver's back: they reject it instead). Recorded (``batch.discarded``); a discarded
    batch can no longer be decided, approved or started, and leaves the approvals queue."""
    with transaction.atomic():
        batch = _locked(batch_id)
        if person.pk != batch.created_by_id:
            raise ProposalRefused(_("Only the person who selected this batch can discard it."))
        _require(batch, BatchState.DRAFT, BatchState.PROPOSED)
        if batch.approvals.exists():
            raise ProposalRefused(
                _("A supervisor has already approved it: it can no longer be discarded.")
            )
        now = timezone.now()
        was_proposed = batch.state == BatchState.PROPOSED
        batch.state = BatchState.DISCARDED
        batch.finished_at = now
        batch.save(update_fields=["state", "finished_at"])
        record_event("batch.discarded", batch=batch, actor=person, now=now)
        if was_proposed:
            _announce(batch)
        publish_progress(batch.id)
        return batch


def count_change(batch: Batch) -> dict[str, Any] | None:
    """For a batch of "every task matching": how many tasks the offer counted, how many the
    selection froze, and the difference (tasks that stopped matching the filter, or started to,
    between the count and the freeze). ``None`` when nothing was counted (ticked rows)."""
    selection = json.loads(batch.selection or "{}")
    counted = selection.get("counted")
    if not isinstance(counted, int) or isinstance(counted, bool) or counted < 0:
        return None
    frozen = batch.items.count()
    why = selection.get("stopped")
    stopped_by_reason = (
        [
            {
                "reason": reason,
                "label": str(STOPPED_MATCHING.get(reason, reason)),
                "count": entry["count"],
                "tasks": entry["tasks"],
            }
            for reason, entry in sorted(why.items(), key=lambda pair: -pair[1]["count"])
        ]
        if isinstance(why, dict)
        else []
    )
    stopped = sum(row["count"] for row in stopped_by_reason) if isinstance(why, dict) else None
    if stopped is None:
        # Only the numbers are known (a count too large to keep): the net difference.
        return {
            "counted": counted,
            "frozen": frozen,
            "stopped": max(counted - frozen, 0),
            "started": max(frozen - counted, 0),
            "by_reason": [],
        }
    return {
        "counted": counted,
        "frozen": frozen,
        "stopped": stopped,
        "started": frozen - (counted - stopped),
        "by_reason": stopped_by_reason,
    }


def batch_decide(batch: Batch, *, person: User, decision: dict[str, Any]) -> Batch:
    """Keep the decide step's cleaned fields (a draft only; the confirm step follows). A
    result that the API would refuse for one of the tasks, once filled in, is not kept."""
    with transaction.atomic():
        locked = _locked_draft(batch.id, person)
        _require_eligible(locked)
        if locked.verified_at is None:
            raise ProposalRefused(_("Go through the verify checklist first."))
        _refuse_too_large(locked, decision)
        policy = policy_for(locked.namespace_id)
        if policy is not None and not evidence_matches(policy, decision.get("evidence_ref", "")):
            raise ProposalRefused(
                _("In this namespace an evidence reference looks like %(example)s.")
                % {"example": policy.example}
            )
        locked.decision = json.dumps(decision, sort_keys=True)
        locked.save(update_fields=["decision"])
    return locked


def decision_fields(
    action: str, cleaned: dict[str, Any], *, template: bool = False, result_text: str = ""
) -> dict[str, Any]:
    """The decide form's cleaned data as the batch keeps it (JSON-safe; a result as exact JSON
    text, times as RFC 3339). ``result_text`` is the result as its author typed it, spacing
    and all, shown again when the decision is changed (what is sent is ``result``)."""
    fields: dict[str, Any] = {"reason": cleaned["reason"], "evidence_ref": cleaned["evidence_ref"]}
    if action == "review":
        fields |= {
            "outcome": cleaned["outcome"],
            "result": strictjson.dumps(cleaned["result"]),
            "result_text": result_text,
            "template": template,
        }
    else:
        fields["task_timeout_ms"] = cleaned["task_timeout_ms"]
        for name in ("available_at", "start_deadline_at"):
            value = cleaned.get(f"{name}_utc")
            fields[name] = format_utc(value) if value else None
    return fields


def item_body(batch: Batch, item: BatchItem) -> str:
    """The exact request body the batch sends for ``item``, pinned to its seen revision."""
    decided = batch.decided
    if batch.action == "review":
        result = strictjson.loads(decided["result"])
        if decided.get("template"):
            result = _filled(result, template_values(item))
        request = ReviewTaskRequest(
            expected_revision=item.seen_revision,
            reason=decided["reason"],
            evidence_ref=decided["evidence_ref"],
            outcome=decided["outcome"],
            result=result,
        )
        pretty = request.to_json(indent=2)
        return request.to_json() if len(pretty.encode()) > MAX_RESULT_BYTES else pretty
    available_at, start_deadline_at = (
        parse_utc(decided[name]) if decided.get(name) else None
        for name in ("available_at", "start_deadline_at")
    )
    return RetryTaskRequest(
        expected_revision=item.seen_revision,
        reason=decided["reason"],
        evidence_ref=decided["evidence_ref"],
        task_timeout_ms=decided["task_timeout_ms"],
        available_at=available_at,
        start_deadline_at=start_deadline_at,
    ).to_json(indent=2)


# One pass over each string: a field's value is never searched again, so a handler that
# contains "{{business_key}}" stays as it is.
_PLACEHOLDER = re.compile(r"\{\{(" + "|".join(TEMPLATE_FIELDS) + r")\}\}")


def template_values(item: BatchItem) -> dict[str, str]:
    """What each template field becomes for ``item``."""
    return {
        "id": item.task_id,
        "queue_id": item.queue_id,
        "handler": item.handler,
        "business_key": item.business_key,
        "revision": item.seen_revision,
    }


def _filled(value: Any, values: dict[str, str]) -> Any:
    """``value`` with "{{field}}" in its strings replaced by the task's field."""
    if isinstance(value, str):
        return _PLACEHOLDER.sub(lambda match: values[match.group(1)], value)
    if isinstance(value, list):
        return [_filled(v, values) for v in value]
    if isinstance(value, dict):
        return {k: _filled(v, values) for k, v in value.items()}
    return value


@dataclass(frozen=True)
class TooLarge:
    item: BatchItem
    size: int  # bytes of the filled-in result, as the API measures it


def too_large(batch: Batch, decided: dict[str, Any]) -> TooLarge | None:
    """The first eligible task whose filled-in result the API would refuse for its size (O5:
    at most ``MAX_RESULT_BYTES`` as sent), or ``None``."""
    for item, size in filled_sizes(batch, decided):
        if size > MAX_RESULT_BYTES:
            return TooLarge(item, size)
    return None


def filled_sizes(batch: Batch, decided: dict[str, Any]) -> Iterator[tuple[BatchItem, int]]:
    """Each eligible task, with the size of its result as ``item_body`` sends it compact; one
    task only when the result is the same for all (no template fields in it).

    ``item_body`` sends a result that large compact, and the API measures the result as sent,
    so the limit holds for the compact text. Its size is counted, not built: the template's
    compact size, plus for each placeholder in its strings what the task's field adds once
    escaped as JSON (escaping is character by character, so the sizes add up). Checking
    10 000 tasks against a large template takes milliseconds, not gigabytes of text."""
    if batch.action != "review":
        return  # a retry's body is the same small size for every task
    result = strictjson.loads(decided["result"])
    size = _json_bytes(result)
    counts = _placeholders(result) if decided.get("template") else {}
    items = eligible_items(batch).only("id", "batch_id", *_FIELD_COLUMNS.values())
    if not counts:
        first = items.first()
        if first is not None:
            yield first, size
        return
    for item in items.iterator(chunk_size=1000):
        values = template_values(item)
        # Each "{{name}}" (its length plus four braces) gives way to the field's escaped text
        # (its JSON without the two quotes).
        grown = sum(
            n * (_json_bytes(values[name]) - 2 - (len(name) + 4)) for name, n in counts.items()
        )
        yield item, size + grown


_FIELD_COLUMNS = {
    "id": "task_id",
    "queue_id": "queue_id",
    "handler": "handler",
    "business_key": "business_key",
    "revision": "seen_revision",
}


def _json_bytes(value: Any) -> int:
    return len(strictjson.dumps(value).encode())


def _placeholders(value: Any) -> dict[str, int]:
    """How often each template field is named in the strings of ``value``, counted as
    ``_filled`` replaces them."""
    counts: dict[str, int] = {}
    stack = [value]
    while stack:
        current = stack.pop()
        if isinstance(current, str):
            for match in _PLACEHOLDER.finditer(current):
                counts[match.group(1)] = counts.get(match.group(1), 0) + 1
        elif isinstance(current, list):
            stack.extend(current)
        elif isinstance(current, dict):
            stack.extend(current.values())
    return counts


def _refuse_too_large(batch: Batch, decided: dict[str, Any]) -> None:
    found = too_large(batch, decided)
    if found is None:
        return
    raise ResultTooLarge(
        _(
            "Filled in for task %(task)s, the result would be %(size)s: the recovery API takes "
            "at most %(limit)s. Shorten the result or its template, or leave that task out."
        )
        % {
            "task": found.item.task_id,
            "size": filesizeformat(found.size),
            "limit": filesizeformat(MAX_RESULT_BYTES),
        }
    )


# --- Confirm, approve, reject --------------------------------------------------------------------


def approval_required(action: str) -> bool:
    return bool(settings.CONSOLE_APPROVAL_POLICY[action]["required"])


def batch_submit(batch: Batch, *, person: User, typed_count: int) -> Batch:
    """The confirm step: the count typed back must be the eligible count. Under the approval
    policy the batch becomes one proposal; otherwise it starts, sent as its author: it is
    returned ``starting``, and ``batch_store`` (its caller's next step, else the worker's)
    stores its submissions."""
    with transaction.atomic():
        locked = _locked_draft(batch.id, person)
        if not locked.decision:
            raise ProposalRefused(_("Decide first."))
        eligible = eligible_items(locked).count()
        if eligible == 0:
            raise ProposalRefused(_("No task of this batch is eligible."))
        if typed_count != eligible:
            raise ProposalRefused(
                _("Type the number of tasks to be sent: %(count)s.") % {"count": eligible}
            )
        _refuse_too_large(locked, locked.decided)
        now = timezone.now()
        if approval_required(locked.action):
            locked.state = BatchState.PROPOSED
            locked.required_approvals = settings.CONSOLE_APPROVAL_POLICY[locked.action]["approvers"]
            locked.expires_at = now + timedelta(hours=settings.CONSOLE_PROPOSAL_TTL_HOURS)
            locked.save(update_fields=["state", "required_approvals", "expires_at"])
            record_event("batch.proposed", batch=locked, actor=person, now=now)
            _announce(locked)
            return locked
        return _start(locked, sent_as=person, now=now)


def batch_approve(
    *,
    batch_id: str,
    approver: User,
    note: str = "",
    authenticated: Authenticated | None = None,
) -> Batch:
    """Record a supervisor's approval, as for a single proposal (``proposal_approve``): nobody
    approves their own, nor twice. The last approval needed starts the batch, sent as that
    supervisor (returned ``starting``: ``batch_store`` follows); until then it stays proposed,
    and the approvals queue and the batch's page hear of each approval. An expired batch
    cannot be approved."""
    _expire_batch_if_due(batch_id)
    with transaction.atomic():
        batch = _locked(batch_id)
        _require(batch, BatchState.PROPOSED)
        mine = refuse_own(author_id=batch.created_by_id, decider=approver, verb="approve")
        if not approver.groups.filter(name=SUPERVISOR).exists():
            raise ProposalRefused(_("Only a supervisor can approve a proposal."))
        if Approval.objects.filter(batch=batch, approver_id__in=mine).exists():
            raise ProposalRefused(_("You have already approved this proposal."))
        now = timezone.now()
        Approval.objects.create(batch=batch, approver=approver, note=note, created_at=now)
        record_event(
            "batch.approved",
            batch=batch,
            actor=approver,
            note=note,
            now=now,
            authenticated=authenticated,
        )
        if batch.approvals.count() < batch.required_approvals:
            _announce(batch)
            publish_progress(batch.id)
            return batch
        batch.decided_by, batch.decided_at, batch.decision_note = approver, now, note
        batch.save(update_fields=["decided_by", "decided_at", "decision_note"])
        started = _start(batch, sent_as=approver, now=now)
        _announce(started)
        return started


def batch_reject(
    *,
    batch_id: str,
    supervisor: User,
    reason: str,
    authenticated: Authenticated | None = None,
) -> Batch:
    if not reason.strip():
        raise ProposalRefused(_("Say why the proposal is rejected."))
    _expire_batch_if_due(batch_id)
    with transaction.atomic():
        batch = _locked(batch_id)
        _require(batch, BatchState.PROPOSED)
        refuse_own(author_id=batch.created_by_id, decider=supervisor, verb="reject")
        if not supervisor.groups.filter(name=SUPERVISOR).exists():
            raise ProposalRefused(_("Only a supervisor can reject a proposal."))
        now = timezone.now()
        batch.state = BatchState.REJECTED
        batch.decided_by, batch.decided_at, batch.decision_note = supervisor, now, reason
        batch.finished_at = now
        batch.save(
            update_fields=["state", "decided_by", "decided_at", "decision_note", "finished_at"]
        )
        record_event(
            "batch.rejected",
            batch=batch,
            actor=supervisor,
            note=reason,
            now=now,
            authenticated=authenticated,
        )
        _announce(batch)
        publish_progress(batch.id)
        return batch


def batches_expire_due(now: datetime) -> int:
    """Expire every proposed batch past its time (the reconciler runs this)."""
    due = Batch.objects.filter(state=BatchState.PROPOSED, expires_at__lte=now)
    return sum(_expire_batch_if_due(batch_id, now) for batch_id in due.values_list("id", flat=True))


def _expire_batch_if_due(batch_id: str, now: datetime | None = None) -> bool:
    """Expire the batch if it is proposed past its time, in a transaction of its own: a refusal
    that follows rolls back its caller's, and the expiry must stay. It keeps its place in the
    history ("batch.expired"), and its author is told."""
    now = now or timezone.now()
    with transaction.atomic():
        batch = _locked(batch_id)
        if batch.state != BatchState.PROPOSED or batch.expires_at is None or batch.expires_at > now:
            return False
        batch.state = BatchState.EXPIRED
        batch.finished_at = now
        batch.save(update_fields=["state", "finished_at"])
        record_event("batch.expired", batch=batch, actor=None, now=now)
        _announce(batch)
        publish_progress(batch.id)
    return True


def _start(batch: Batch, *, sent_as: User, now: Any) -> Batch:
    """The decision is final: the batch is ``starting``, to be sent as ``sent_as`` once
    ``batch_store`` has stored every one of its submissions."""
    batch.state = BatchState.STARTING
    batch.sent_as = sent_as
    batch.save(update_fields=["state", "sent_as"])
    publish_progress(batch.id)
    return batch


def batch_store_next(*, batch_id: str) -> bool:
    """Store the submissions of the next ``CONSOLE_BATCH_START_CHUNK`` eligible items of a
    starting batch, in one transaction; when none is left, the batch is ``running`` (the
    "batch.started" entry) and the worker may send it. Whether more remain.

    Each chunk holds the batch's row lock and the record's chain head for a bounded time
    (docs/performance.md), instead of one transaction for the whole batch. Idempotent: an item
    that has its submission, or its outcome, is done; the lock keeps two callers (the person's
    request and a worker resuming) from storing one item twice. A task whose revision already
    has a decision (made elsewhere meanwhile) is not decided twice: its item ends as
    ``taken``."""
    with transaction.atomic():
        # Only the batch's row is locked (its people are read once each, unlocked).
        batch = _locked(batch_id)
        if batch.state != BatchState.STARTING:
            return False
        chunk = settings.CONSOLE_BATCH_START_CHUNK
        waiting = eligible_items(batch).filter(outcome="", submission__isnull=True)
        items = list(waiting[: chunk + 1])
        now = timezone.now()
        stored = [_store(batch, item, now) for item in items[:chunk]]
        # Due at once, not after the grace a single decision gets: the worker sends nothing
        # of a batch before it is running.
        Submission.objects.filter(id__in=[s for s in stored if s]).update(next_attempt_at=now)
        if len(items) > chunk:
            publish_progress(batch.id)
            return True
        batch.state = BatchState.RUNNING
        batch.started_at = now
        batch.save(update_fields=["state", "started_at"])
        record_event("batch.started", batch=batch, actor=batch.sent_as, now=now)
        publish_progress(batch.id)
        return False


def batch_store(*, batch_id: str) -> Batch:
    """Store every submission of a starting batch, chunk by chunk (``batch_store_next``)."""
    while batch_store_next(batch_id=batch_id):
        pass
    return Batch.objects.get(id=batch_id)


def _store(batch: Batch, item: BatchItem, now: Any) -> str:
    """The item's submission, stored; its id, or "" when the revision was taken."""
    assert batch.sent_as is not None  # noqa: S101 -- set when the batch started
    created = submission_create(
        action=batch.action,
        task_id=item.task_id,
        queue_id=item.queue_id,
        namespace_id=batch.namespace_id,
        expected_revision=item.seen_revision,
        body=item_body(batch, item),
        created_by=batch.created_by,
        sent_as=batch.sent_as,
        batch=batch,
        # Each task's decision was started when the batch was selected; the task's last error
        # code the verify step did not read (one more read per task): the insight's own record
        # of the task's waiting has it, when Orbit's stream told it (docs/insight.md).
        decided_on=DecidedOn(
            handler=item.handler, waiting_since=item.waiting_since, started_at=batch.created_at
        ),
    )
    if not created.created:
        _settle_item(item, ItemOutcome.TAKEN, "", now)
        return ""
    item.submission = created.submission
    item.save(update_fields=["submission"])
    return created.submission.id


# --- Pause, resume, cancel ----------------------------------------------------------------------


def batch_pause(*, batch_id: str, person: User) -> Batch:
    return _move(batch_id, person, BatchState.RUNNING, BatchState.PAUSED, "batch.paused")


def batch_resume(*, batch_id: str, person: User) -> Batch:
    return _move(batch_id, person, BatchState.PAUSED, BatchState.RUNNING, "batch.resumed")


def batch_cancel(*, batch_id: str, person: User) -> Batch:
    """Stop what is not yet sent: those submissions are closed as cancelled (their decision
    slots freed), and so are the items of a starting batch not stored yet; what was sent is
    still followed to its answer."""
    with transaction.atomic():
        batch = _locked(batch_id)
        _may_steer(batch, person)
        _require(batch, BatchState.STARTING, BatchState.RUNNING, BatchState.PAUSED)
        now = timezone.now()
        unsent = Submission.objects.select_for_update().filter(
            batch_item__batch=batch, state=SubmissionState.PENDING, send_count=0
        )
        ids = list(unsent.values_list("id", flat=True))
        Submission.objects.filter(id__in=ids).update(
            state=SubmissionState.CANCELLED,
            decision_slot=None,
            next_attempt_at=None,
            resolved_at=now,
        )
        BatchItem.objects.filter(submission_id__in=ids).update(
            outcome=ItemOutcome.CANCELLED, settled_at=now
        )
        unstored = eligible_items(batch).filter(outcome="", submission__isnull=True)
        not_sent = len(ids) + unstored.update(outcome=ItemOutcome.CANCELLED, settled_at=now)
        batch.state = BatchState.CANCELLED
        batch.save(update_fields=["state"])
        record_event(
            "batch.cancelled", batch=batch, actor=person, note=f"{not_sent} not sent", now=now
        )
        finish_if_done(batch, now)
        publish_progress(batch.id)
        return batch


def _move(batch_id: str, person: User, source: str, target: str, kind: str) -> Batch:
    with transaction.atomic():
        batch = _locked(batch_id)
        _may_steer(batch, person)
        _require(batch, source)
        batch.state = target
        batch.save(update_fields=["state"])
        record_event(kind, batch=batch, actor=person)
        publish_progress(batch.id)
        return batch


def _may_steer(batch: Batch, person: User) -> None:
    """The batch's author, the supervisor who sent it, or any supervisor steers it."""
    if person.pk in (batch.created_by_id, batch.sent_as_id):
        return
    if not person.groups.filter(name=SUPERVISOR).exists():
        raise ProposalRefused(_("Only its author or a supervisor can pause or cancel a batch."))


# --- Outcomes ------------------------------------------------------------------------------------


def _settle_item(item: BatchItem, outcome: str, error_code: str, now: Any) -> None:
    item.outcome, item.error_code, item.settled_at = outcome, error_code, now
    item.save(update_fields=["outcome", "error_code", "settled_at"])


def settle(item: BatchItem, submission: Submission | None, *, revision_moved: bool) -> bool:
    """Record what a definite answer means for the item; ``False`` while it has none.

    An item without a submission will never be sent, so it has its end too: left out at
    verify (not eligible), else never stored (cancelled before it was sent)."""
    now = timezone.now()
    if submission is None:
        outcome = ItemOutcome.SKIPPED if item.ineligible else ItemOutcome.CANCELLED
        _settle_item(item, outcome, "", now)
        return True
    if submission.state == SubmissionState.SUCCEEDED:
        outcome = ItemOutcome.DEDUPLICATED if submission.deduplicated else ItemOutcome.APPLIED
    elif submission.state == SubmissionState.REJECTED:
        outcome = ItemOutcome.CHANGED if revision_moved else ItemOutcome.REFUSED
    elif submission.state == SubmissionState.CANCELLED:
        outcome = ItemOutcome.CANCELLED
    elif submission.next_attempt_at is None:  # open, and the reconcile deadline passed
        outcome = ItemOutcome.FAILED
    else:
        return False
    _settle_item(item, outcome, submission.error_code, now)
    return True


def finish_if_done(batch: Batch, now: Any) -> bool:
    """A sending batch with every item settled is finished."""
    if batch.finished_at is not None or not batch.is_sending or batch.state == BatchState.PAUSED:
        return False
    if batch.items.filter(outcome="").exists():
        return False
    Batch.objects.filter(id=batch.id).update(finished_at=now, state=_final(batch))
    record_event("batch.finished", batch=batch, actor=None, note=summary_note(batch), now=now)
    return True


def _final(batch: Batch) -> str:
    return BatchState.CANCELLED if batch.state == BatchState.CANCELLED else BatchState.FINISHED


def record_batch_export(batch: Batch, *, actor: User, fmt: str) -> None:
    """An export of a batch's outcomes is recorded (``batch.exported``), with its format and
    time, as an export of the console's record is (``record_export``)."""
    now = timezone.now()
    note = json.dumps({"format": fmt, "exported_at": now.isoformat()}, sort_keys=True)
    record_event("batch.exported", batch=batch, actor=actor, note=note, now=now)


def outcome_counts(batch: Batch) -> dict[str, int]:
    """Items by outcome ("" for those still on their way)."""
    rows = batch.items.values_list("outcome").annotate(n=Count("id")).values_list("outcome", "n")
    return dict(rows)


def summary_note(batch: Batch) -> str:
    counts = outcome_counts(batch)
    return ", ".join(f"{key} {counts[key]}" for key in ItemOutcome.values if counts.get(key))


@dataclass(frozen=True)
class Progress:
    counts: dict[str, int]
    total: int
    done: int
    rate: float | None  # settled items per second since the start
    left: timedelta | None


def progress(batch: Batch) -> Progress:
    counts = outcome_counts(batch)
    total = sum(counts.values())
    done = total - counts.get("", 0)
    skipped = counts.get(ItemOutcome.SKIPPED, 0)
    rate = left = None
    if batch.started_at is not None:
        end = batch.finished_at or timezone.now()
        elapsed = max((end - batch.started_at).total_seconds(), 0.001)
        sent = done - skipped
        rate = sent / elapsed
        waiting = counts.get("", 0)
        if waiting and rate > 0:
            left = timedelta(seconds=waiting / rate)
    return Progress(counts=counts, total=total, done=done, rate=rate, left=left)


def _announce(batch: Batch) -> None:
    """Tell the supervisors' approvals queue (live) that this batch was proposed or decided."""
    publish_on_commit(
        APPROVALS_GROUP,
        {"type": BATCH_APPROVALS_MESSAGE, "batch_id": batch.id, "state": batch.state},
    )


def publish_progress(batch_id: str) -> None:
    publish_on_commit(batch_group(batch_id), {"type": BATCH_MESSAGE, "batch_id": batch_id})


def _locked(batch_id: str) -> Batch:
    return Batch.objects.select_for_update().get(id=batch_id)


def _locked_draft(batch_id: str, person: User) -> Batch:
    """The batch, locked, if it is a draft and ``person`` its author (else ``ProposalRefused``)."""
    locked = _locked(batch_id)
    _require_author(locked, person)
    _require(locked, BatchState.DRAFT)
    return locked


def _require(batch: Batch, *states: str) -> None:
    if batch.state not in states:
        raise ProposalRefused(
            _("This batch is %(state)s: that step is not open.")
            % {"state": batch.get_state_display()}
        )


def _require_author(batch: Batch, person: User) -> None:
    if person.pk != batch.created_by_id:
        raise ProposalRefused(_("Only the person who selected this batch can decide it."))


def visible_batches(namespaces: Iterable[str]) -> QuerySet[Batch]:
    """Batches of these namespaces (then only those ``within_queues`` of the credential)."""
    return Batch.objects.filter(namespace_id__in=[*namespaces, ""])


def within_queues(batch: Batch, queue_scope: frozenset[str]) -> bool:
    """Whether a credential limited to ``queue_scope`` (empty: its whole namespace) reads every
    task of the batch: a batch shows its tasks, so a person who cannot read one of them does not
    see the batch (docs/access.md)."""
    if not queue_scope:
        return True
    outside = batch.items.exclude(queue_id__in=queue_scope).exclude(queue_id="")
    return not outside.exists()


def seen_by(person: Person, batch: Batch) -> bool:
    """Whether the person sees the batch (its page, the lists, the export, the sockets): their
    credential in its namespace reads every one of its tasks."""
    credential = person.credential_in(batch.namespace_id)
    return credential is not None and within_queues(batch, credential.queue_scope)
