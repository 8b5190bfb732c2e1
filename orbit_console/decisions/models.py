"""Decisions and their record: proposals, approvals, durable submissions and the console's
append-only record of them.

The console never stores tasks: the recovery API is the source of truth for them. The tables
keep the names they had when the console app held these models (``console_*``).
"""

import json
from functools import cached_property
from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone
from django.utils.translation import gettext_lazy as _

from orbit_console.lib.ids import new_id
from orbit_console.lib.rfc3339 import format_utc
from orbit_console.people.accounts import is_company


class SubmissionAction(models.TextChoices):
    REVIEW = "review", _("Review")
    RETRY = "retry", _("Retry")


class SubmissionState(models.TextChoices):
    PENDING = "pending", _("Stored, not yet sent")
    UNKNOWN = "unknown", _("Outcome unknown")
    RETRY_LATER = "retry_later", _("Not applied yet: try again later")
    SUCCEEDED = "succeeded", _("Applied")
    REJECTED = "rejected", _("Rejected")
    CANCELLED = "cancelled", _("Cancelled before it was sent")


OPEN_STATES = (SubmissionState.PENDING, SubmissionState.UNKNOWN, SubmissionState.RETRY_LATER)


class ChainHead(models.Model):
    """The tail of an append-only hash chain: locked while an entry is appended, so that
    entries are numbered and linked one after another."""

    name = models.CharField(max_length=40, primary_key=True)
    seq = models.PositiveBigIntegerField(default=0)
    last_hash = models.CharField(max_length=64, blank=True)

    class Meta:
        db_table = "console_chainhead"

    def __str__(self) -> str:
        return f"{self.name} @ {self.seq}"


class ProposalState(models.TextChoices):
    PENDING = "pending", _("Waiting for approval")
    APPROVED = "approved", _("Approved and sent")
    REJECTED = "rejected", _("Rejected by a supervisor")
    WITHDRAWN = "withdrawn", _("Withdrawn by the proposer")
    EXPIRED = "expired", _("Expired without being sent")


class Proposal(models.Model):
    """A recovery decision waiting for a supervisor's approval (four eyes).

    Like a submission's request, the proposal's action, task, pinned revision, exact body and
    idempotency key are fixed the moment it is made; the submission an approval creates sends
    exactly these. ``decision_slot`` works as on ``Submission``: one live proposal per task
    revision, freed when the proposal is rejected, withdrawn, expires, or the platform refuses it.
    """

    id = models.CharField(max_length=32, primary_key=True, default=new_id, editable=False)
    action = models.CharField(max_length=8, choices=SubmissionAction.choices)
    task_id = models.CharField(max_length=64, db_index=True)
    queue_id = models.CharField(max_length=64, blank=True)
    # What the supervisor decides on, shown in the approvals queue: the task's handler when
    # the decision was made (the body holds the outcome and the reason).
    handler = models.CharField(max_length=512, blank=True, default="")
    # The task's namespace, as the API showed it when the decision was made (before the
    # console kept that: the proposer's, when it minted their credential). Supervisors' queues
    # show the proposals of their own namespace, then only those their credential can read.
    namespace_id = models.CharField(max_length=64, blank=True)
    # What the decision was made on, as the proposer saw the task (``DecidedOn``, kept for
    # docs/insight.md): its last attempt's error code, since when it waited for a person, and
    # when the proposer opened the wizard. Empty on proposals made before the console kept it.
    last_error_code = models.CharField(max_length=64, blank=True, default="")
    waiting_since = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    expected_revision = models.CharField(max_length=24)
    idempotency_key = models.CharField(max_length=80, unique=True)
    body = models.TextField()
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="proposals"
    )
    required_approvals = models.PositiveSmallIntegerField()
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    decision_slot = models.CharField(max_length=100, null=True, blank=True, unique=True)
    state = models.CharField(
        max_length=12, choices=ProposalState.choices, default=ProposalState.PENDING
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)

    class Meta:
        db_table = "console_proposal"
        indexes = [models.Index(fields=["state", "created_at"], name="proposal_queue")]

    def __str__(self) -> str:
        return f"proposed {self.action} of {self.task_id} @ {self.expected_revision}"

    @property
    def is_pending(self) -> bool:
        return self.state == ProposalState.PENDING

    @cached_property
    def request(self) -> dict[str, Any]:
        """The body that will be sent, read (outcome, reason...) for people to see."""
        body: dict[str, Any] = json.loads(self.body)
        return body


class Approval(models.Model):
    """One supervisor's approval of a proposal or of a batch (exactly one of the two): the one
    four-eyes record of both (docs/approvals.md). A decision is sent once it holds as many
    approvals, each by a different supervisor, as its ``required_approvals``."""

    proposal = models.ForeignKey(
        Proposal, null=True, blank=True, on_delete=models.PROTECT, related_name="approvals"
    )
    batch = models.ForeignKey(
        "Batch", null=True, blank=True, on_delete=models.PROTECT, related_name="approvals"
    )
    approver = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    note = models.TextField(blank=True)
    created_at = models.DateTimeField()

    class Meta:
        db_table = "console_approval"
        constraints = [
            models.UniqueConstraint(
                fields=["proposal", "approver"], name="one_approval_per_person"
            ),
            models.UniqueConstraint(
                fields=["batch", "approver"], name="one_batch_approval_per_person"
            ),
            models.CheckConstraint(
                condition=models.Q(proposal__isnull=False, batch__isnull=True)
                | models.Q(proposal__isnull=True, batch__isnull=False),
                name="approval_of_one_decision",
            ),
        ]

    def __str__(self) -> str:
        return f"approval of {self.proposal_id or self.batch_id} by {self.approver_id}"


class Submission(models.Model):
    """One recovery decision and its request to the recovery API (C9, I1, I6).

    The request — idempotency key, expected revision, exact JSON body, action, task and the
    person whose credential sends it — is stored before the first send and never changed.
    The outcome fields below it record what the API answered, until the outcome is definite.

    ``decision_slot`` holds ``<task_id>@<revision>`` while the submission is open or applied:
    its unique index lets only one decision be made per task revision, so a double click, two
    tabs or two people deciding at once yield one submission. A definite rejection clears it.
    """

    id = models.CharField(max_length=32, primary_key=True, default=new_id, editable=False)
    action = models.CharField(max_length=8, choices=SubmissionAction.choices)
    task_id = models.CharField(max_length=64, db_index=True)
    queue_id = models.CharField(max_length=64, blank=True)
    # The task's namespace, as the API showed it when the decision was made: lists and
    # exports filter on it in the database (console/access.py has the rule).
    namespace_id = models.CharField(max_length=64, blank=True, default="")
    # What the decision was made on (``DecidedOn``, as on ``Proposal``): the task's handler
    # and last error code, since when it waited for a person, when its decider started it (the
    # wizard opened; a batch's selection). Empty on decisions made before the console kept it.
    handler = models.CharField(max_length=512, blank=True, default="")
    last_error_code = models.CharField(max_length=64, blank=True, default="")
    waiting_since = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    expected_revision = models.CharField(max_length=24)
    idempotency_key = models.CharField(max_length=80, unique=True)
    body = models.TextField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="submissions"
    )
    sent_as = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+"
    )
    proposal = models.OneToOneField(
        Proposal, null=True, blank=True, on_delete=models.PROTECT, related_name="submission"
    )
    created_at = models.DateTimeField()

    decision_slot = models.CharField(max_length=100, null=True, blank=True, unique=True)
    state = models.CharField(
        max_length=16, choices=SubmissionState.choices, default=SubmissionState.PENDING
    )
    send_count = models.PositiveIntegerField(default=0)
    last_sent_at = models.DateTimeField(null=True, blank=True)
    next_attempt_at = models.DateTimeField(null=True, blank=True, db_index=True)
    reconcile_deadline = models.DateTimeField()
    http_status = models.PositiveSmallIntegerField(null=True, blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    error_message = models.TextField(blank=True)
    api_request_id = models.CharField(max_length=64, blank=True)
    audit_id = models.CharField(max_length=64, blank=True)
    deduplicated = models.BooleanField(null=True, blank=True)
    result_task_id = models.CharField(max_length=64, blank=True)
    resolved_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "console_submission"
        indexes = [
            models.Index(fields=["state", "next_attempt_at"], name="submission_backlog"),
            # A person's own decisions, newest first (the "my decisions" page).
            models.Index(fields=["created_by", "created_at", "id"], name="submission_mine"),
        ]

    def __str__(self) -> str:
        return f"{self.action} of {self.task_id} @ {self.expected_revision}"

    @property
    def is_open(self) -> bool:
        return self.state in OPEN_STATES


# A followed task has come to its end when it reaches one of these: a terminal state, or
# NEEDS_REVIEW again (a person must decide once more).
ENDED_STATES = frozenset({"SUCCEEDED", "FAILED", "CANCELLED", "NEEDS_REVIEW"})


class FollowUp(models.Model):
    """What happened after an applied decision's receipt, which means "stored", not "done" (I2).

    One per applied submission: the task whose end the decision awaits — the reviewed task
    itself (terminal from the receipt on), or a retry's new task, followed until it ends
    (``ENDED_STATES``) — and its state and revision when last read from the API. The console's
    event feed reads the task again whenever Orbit announces an event of it; without a live
    stream it looks on its own, with a growing pause (I4). Following stops at ``deadline``.
    """

    submission = models.OneToOneField(
        Submission, primary_key=True, on_delete=models.PROTECT, related_name="followup"
    )
    task_id = models.CharField(max_length=64, db_index=True)
    namespace_id = models.CharField(max_length=64, blank=True, default="")
    state = models.CharField(max_length=16)
    revision = models.PositiveBigIntegerField()
    seen_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    next_look_at = models.DateTimeField(null=True, blank=True)
    looks = models.PositiveIntegerField(default=0)
    deadline = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["ended_at", "next_look_at"], name="followup_due")]

    def __str__(self) -> str:
        return f"{self.task_id} {self.state}@{self.revision}"

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    @property
    def given_up(self) -> bool:
        """Not ended, and no longer followed: its deadline has passed."""
        return self.ended_at is None and self.deadline <= timezone.now()


EVENT_LABELS = {
    "submission.stored": _("Decision stored"),
    "submission.sent": _("Sent to the recovery API"),
    "submission.resent": _("Sent again (same key, same body)"),
    "submission.receipt": _("Receipt received"),
    "submission.outcome_unknown": _("Outcome unknown"),
    "submission.retry_later": _("Not applied yet: try again later"),
    "submission.rejected": _("Rejected by the recovery API"),
    "submission.reconcile_stopped": _("Reconciler stopped: deadline passed"),
    "proposal.proposed": _("Proposed for approval"),
    "proposal.approved": _("Approved"),
    "proposal.rejected": _("Rejected by a supervisor"),
    "proposal.withdrawn": _("Withdrawn"),
    "proposal.expired": _("Expired without being sent"),
    "proposal.closed": _("Closed: the platform refused it"),
    "audit.exported": _("Audit record exported"),
    "batch.selected": _("Batch selected"),
    "batch.proposed": _("Batch proposed for approval"),
    "batch.approved": _("Batch approved"),
    "batch.rejected": _("Batch rejected by a supervisor"),
    "batch.expired": _("Batch expired without being approved"),
    "batch.started": _("Batch started: one submission stored per eligible task"),
    "batch.paused": _("Batch paused"),
    "batch.resumed": _("Batch resumed"),
    "batch.cancelled": _("Batch cancelled: what was not sent will not be"),
    "batch.finished": _("Batch finished"),
    "batch.exported": _("Batch outcomes exported"),
    "batch.verified": _("Batch verified: its author went through the checklist"),
    "batch.discarded": _("Batch discarded by its author: never sent"),
    "submission.cancelled": _("Cancelled before it was sent"),
    "submission.followed": _("What the decision led to has ended"),
}


class ConsoleEvent(models.Model):
    """One entry of the console's append-only record: what people and the console did — a
    submission stored, sent, answered; a proposal made, approved, rejected; an export.

    Rows are only ever inserted (database triggers refuse UPDATE and DELETE) and form one hash
    chain: ``seq`` numbers them from 1, ``prev_hash`` is the previous entry's ``entry_hash``, and
    ``entry_hash`` covers this entry's canonical content (``console/chain.py``).
    """

    id = models.CharField(max_length=32, primary_key=True, default=new_id, editable=False)
    seq = models.PositiveBigIntegerField(unique=True)
    kind = models.CharField(max_length=40)
    task_id = models.CharField(max_length=64, blank=True)
    queue_id = models.CharField(max_length=64, blank=True)
    # The namespace of the task (of the exporting person's credential for an export); empty
    # only on entries recorded before the console kept it, which no explorer shows.
    namespace_id = models.CharField(max_length=64, blank=True, default="")
    submission = models.ForeignKey(
        Submission, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    proposal = models.ForeignKey(
        Proposal, null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    # A batch's own entries (proposed, approved, started, finished...); its items' entries
    # belong to their submissions, which name the batch (``submission.batch_item``).
    batch = models.ForeignKey(
        "Batch", null=True, blank=True, on_delete=models.PROTECT, related_name="events"
    )
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    note = models.TextField(blank=True)
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64, blank=True)
    entry_hash = models.CharField(max_length=64)
    # The audit key that links this entry (lib/auditkeys.py): its id, never the key.
    key_id = models.CharField(max_length=16, default="")
    # How and when the actor of a decision (approval, rejection) last authenticated before it
    # (signin/stepup.py): "password", or "oidc" with the provider's acr ("oidc acr=..."); the
    # time is the provider's auth_time or the password's. Empty on other entries.
    authenticated_how = models.CharField(max_length=120, blank=True, default="")
    authenticated_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        db_table = "console_consoleevent"
        indexes = [
            models.Index(fields=["task_id", "created_at", "id"], name="console_event_task"),
            models.Index(fields=["created_at", "id"], name="console_event_time"),
            models.Index(
                fields=["namespace_id", "created_at", "id"], name="console_event_namespace"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} on {self.task_id}"

    @property
    def label(self) -> str:
        return str(EVENT_LABELS.get(self.kind, self.kind))

    def as_message_data(self) -> dict[str, str]:
        """This event in plain JSON types, for live pushes (``lib/live.py``). Whether company
        sign-in made its people's accounts goes with their names: they are marked wherever
        they are named."""
        on_behalf = self.submission.created_by if self.actor is None and self.submission else None
        return {
            "id": self.id,
            "kind": self.kind,
            "task_id": self.task_id,
            "created_at": format_utc(self.created_at),
            "actor": self.actor.get_username() if self.actor is not None else "",
            "actor_company": "yes" if is_company(self.actor) else "",
            # What the console did on its own (a batch's sends, the reconciler's) is the act of
            # the decision's author, carried out by the console (docs/audit.md, issue 30).
            "for": on_behalf.get_username() if on_behalf is not None else "",
            "for_company": "yes" if is_company(on_behalf) else "",
            "note": self.note,
            "submission_id": self.submission_id or "",
            "proposal_id": self.proposal_id or "",
            "batch_id": self.batch_id or "",
        }


# --- Batches: one decision over many tasks (docs/bulk.md) ------------------------------------


class BatchState(models.TextChoices):
    DRAFT = "draft", _("Selected, not yet confirmed")
    PROPOSED = "proposed", _("Waiting for approval")
    REJECTED = "rejected", _("Rejected by a supervisor")
    # Nobody approved it within CONSOLE_PROPOSAL_TTL_HOURS: nothing of it is sent.
    EXPIRED = "expired", _("Expired without being approved")
    # Decided and approved: its submissions are being stored, a chunk at a time; nothing is
    # sent before every one is (decisions/batches.py ``batch_store``).
    STARTING = "starting", _("Starting: storing its submissions")
    RUNNING = "running", _("Sending")
    PAUSED = "paused", _("Paused")
    CANCELLED = "cancelled", _("Cancelled")
    FINISHED = "finished", _("Finished")
    # Its author gave it up before it was sent (a draft, or a proposal nobody approved yet):
    # it can no longer be decided, approved or started (issue 30).
    DISCARDED = "discarded", _("Discarded by its author: never sent")


class ItemOutcome(models.TextChoices):
    APPLIED = "applied", _("Applied")
    DEDUPLICATED = "deduplicated", _("Applied before (deduplicated)")
    CHANGED = "changed", _("Changed since selected")
    REFUSED = "refused", _("Refused by the recovery API")
    FAILED = "failed", _("Failed: no definite answer in time")
    CANCELLED = "cancelled", _("Cancelled before it was sent")
    SKIPPED = "skipped", _("Not eligible")
    TAKEN = "taken", _("Already decided for this revision")


class Batch(models.Model):
    """One evidenced decision over many tasks: the frozen selection (``BatchItem``: each task
    with the revision it was seen at), the decision (one reason and one evidence reference, the
    outcome and result or the retry's budget), its approval under the four-eyes policy, and
    the sending of one durable submission per eligible task."""

    id = models.CharField(max_length=32, primary_key=True, default=new_id, editable=False)
    action = models.CharField(max_length=8, choices=SubmissionAction.choices)
    namespace_id = models.CharField(max_length=64, blank=True, default="")
    # The work queue's filter that selected the tasks, for people to read (JSON).
    selection = models.TextField(blank=True, default="")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="batches"
    )
    created_at = models.DateTimeField()
    state = models.CharField(max_length=12, choices=BatchState.choices, default=BatchState.DRAFT)
    # The decision, as the decide step cleaned it (JSON; decisions/batches.py builds each
    # task's exact body from it); empty until decided.
    decision = models.TextField(blank=True, default="")
    required_approvals = models.PositiveSmallIntegerField(default=0)
    sent_as = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    decision_note = models.TextField(blank=True)
    # When its author ticked the verify checklist (the decide step opens only then).
    verified_at = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # After a 429 the worker sends nothing of this batch before this moment (RT7).
    hold_until = models.DateTimeField(null=True, blank=True)
    # While proposed: when it expires unless approved (CONSOLE_PROPOSAL_TTL_HOURS).
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        indexes = [models.Index(fields=["state", "created_at"], name="batch_state")]

    def __str__(self) -> str:
        return f"batch {self.action} of {self.id}"

    @cached_property
    def decided(self) -> dict[str, Any]:
        found: dict[str, Any] = json.loads(self.decision) if self.decision else {}
        return found

    @property
    def is_sending(self) -> bool:
        return self.state in (BatchState.RUNNING, BatchState.PAUSED, BatchState.CANCELLED)


class BatchItem(models.Model):
    """One task of a batch, as the verify step saw it, and what became of it."""

    batch = models.ForeignKey(Batch, on_delete=models.PROTECT, related_name="items")
    task_id = models.CharField(max_length=64)
    queue_id = models.CharField(max_length=64, blank=True)
    handler = models.CharField(max_length=512, blank=True, default="")
    # As long as the API allows (tests/test_api_sized_columns.py compares every such column).
    business_key = models.CharField(max_length=512, blank=True, default="")
    seen_state = models.CharField(max_length=16)
    seen_revision = models.CharField(max_length=24, blank=True)
    # Since when the task waited for a person, as the verify step read it (``waiting_since``).
    waiting_since = models.DateTimeField(null=True, blank=True)
    # Why the task is not eligible (decisions/batches.INELIGIBLE); empty: it is.
    ineligible = models.CharField(max_length=20, blank=True, default="")
    submission = models.OneToOneField(
        Submission, null=True, blank=True, on_delete=models.PROTECT, related_name="batch_item"
    )
    outcome = models.CharField(max_length=12, choices=ItemOutcome.choices, blank=True)
    error_code = models.CharField(max_length=40, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["batch", "task_id"], name="one_item_per_task")
        ]
        indexes = [models.Index(fields=["batch", "outcome"], name="batch_item_outcome")]

    def __str__(self) -> str:
        return f"{self.task_id} @ {self.seen_revision} in {self.batch_id}"

    @property
    def eligible(self) -> bool:
        return not self.ineligible


class EvidencePolicy(models.Model):
    """What an evidence reference must look like in one namespace, and where it lives
    (docs/notifications.md, "Evidence that links"). ``pattern`` is a regular expression the
    whole reference must match (the wizard checks it before confirming); ``example`` is shown
    beside the field; ``link_template`` makes a link of a matching reference: ``{0}`` is the
    whole reference, ``{1}``... its groups (URL-quoted). Without a row nothing changes."""

    namespace_id = models.CharField(max_length=64, unique=True)
    pattern = models.CharField(max_length=200)
    example = models.CharField(max_length=200)
    link_template = models.CharField(max_length=500, blank=True, default="")
    updated_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"evidence policy of {self.namespace_id}"
