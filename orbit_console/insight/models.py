"""What the insight figures are made of (docs/insight.md).

Three kinds of fact, each a row that moves forward as what it records happens, written in the
transaction of the act or event that moves it:

- ``Wait``: one period in which a task waited for a person (told by Orbit's event stream, found
  by the backfill, or learnt from a decision);
- ``DecisionFact``: one decision the console made about one task, from its start to its
  outcome and, for a retry, to the end of the new task;
- ``BatchFact``: one batch, from its selection to its end.

And the rollups kept from them (``tallies.py``): counts per UTC hour and UTC day
(``DecisionTally``, ``WaitTally``), per day for precedent (``PrecedentTally``), the three clocks'
mergeable sketches (``ClockTally``), and the tasks waiting at each hour (``WaitingSample``). A
rollup row is the sum of what every fact contributes to it (``tallies.py``): no page scans
history, and ``manage.py insight check`` recomputes them from the facts.

Columns that copy a field of the recovery API are as long as the API allows
(tests/test_api_sized_columns.py); a handler is kept to the embedded ledger's 200 characters.
"""

from django.conf import settings
from django.db import models

HOUR = "h"
DAY = "d"
GRAINS = (HOUR, DAY)

HANDLER_CHARS = 200  # the embedded ledger's (ledger.Task.handler); longer ones are cut
EVIDENCE_CHARS = 512  # C10


class WaitKind(models.TextChoices):
    REVIEW = "review", "parked in NEEDS_REVIEW"
    RETRY = "retry", "ended FAILED or CANCELLED, a retry possible"


class WaitEnd(models.TextChoices):
    REVIEWED = "reviewed", "reviewed"
    RETRIED = "retried", "retried"
    # The task moved on otherwise: an execution or a cancellation ended it, or its revision
    # moved while it waited (a new period starts, if it still waits).
    MOVED = "moved", "moved on"
    # The backfill no longer found it waiting; when it left is not known (docs/insight.md).
    GONE = "gone", "no longer waiting when looked at"


class WaitOrigin(models.TextChoices):
    STREAM = "stream", "Orbit's event stream"
    BACKFILL = "backfill", "the backfill's look at the tasks in NEEDS_REVIEW"
    DECISION = "decision", "a decision of the console"


class Wait(models.Model):
    """One period in which a task waited for a person: parked in NEEDS_REVIEW, or ended FAILED
    or CANCELLED with a retry possible, at one revision. A decision pins that revision (RV1,
    RT1), so ``(task_id, revision)`` names the period a decision ends the waiting of.

    Open while ``ended_at`` is empty; ``open_task`` then holds the task's id, so that a task
    waits in one period at a time. ``first_started_at`` is the start of the first decision made
    about it (the waiting clock's end). ``deadline`` is when a person should have decided: set by
    the rules registered with ``waiting.decide_deadlines_with`` (waiting-time objectives,
    ``Objective``), empty where none applies; ``breached_at``: when it was told to have waited
    past it."""

    namespace_id = models.CharField(max_length=64)
    queue_id = models.CharField(max_length=64, blank=True, default="")
    task_id = models.CharField(max_length=64)
    revision = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=8, choices=WaitKind.choices)
    handler = models.CharField(max_length=HANDLER_CHARS, blank=True, default="")
    error_code = models.CharField(max_length=64, blank=True, default="")
    entered_at = models.DateTimeField()
    origin = models.CharField(max_length=8, choices=WaitOrigin.choices)
    deadline = models.DateTimeField(null=True, blank=True)
    first_started_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    end = models.CharField(max_length=8, choices=WaitEnd.choices, blank=True, default="")
    open_task = models.CharField(max_length=64, null=True, blank=True, unique=True)
    # When the notifier told that it waited past its deadline (objectives.py): once per period.
    breached_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task_id", "revision"], name="insight_wait_once")
        ]
        indexes = [
            # Waiting now, oldest first (selectors.waiting_now, the samples).
            models.Index(fields=["namespace_id", "ended_at", "entered_at"], name="insight_waiting"),
            # Waiting past a deadline (objectives).
            models.Index(fields=["ended_at", "deadline"], name="insight_wait_deadline"),
            # Waiting past a deadline and not yet told (the notifier's scan, objectives.py).
            models.Index(
                fields=["ended_at", "breached_at", "deadline"], name="insight_wait_untold"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.task_id}@{self.revision} waiting since {self.entered_at}"

    @property
    def is_open(self) -> bool:
        return self.ended_at is None


class Outcome(models.TextChoices):
    PENDING = "pending", "proposed, waiting for approval"
    SENDING = "sending", "stored, no definite answer yet"
    SUCCEEDED = "succeeded", "declared SUCCEEDED"
    FAILED = "failed", "declared FAILED"
    RETRIED = "retried", "retried"
    REFUSED = "refused", "refused by the recovery API"
    CANCELLED = "cancelled", "cancelled before it was sent"
    REJECTED = "rejected", "proposal rejected"
    EXPIRED = "expired", "proposal expired"
    WITHDRAWN = "withdrawn", "proposal withdrawn"


APPLIED = frozenset({Outcome.SUCCEEDED, Outcome.FAILED, Outcome.RETRIED})
SETTLED = APPLIED | {
    Outcome.REFUSED,
    Outcome.CANCELLED,
    Outcome.REJECTED,
    Outcome.EXPIRED,
    Outcome.WITHDRAWN,
}


class DecisionFact(models.Model):
    """One decision the console made about one task: a proposal (with the submission its
    approval made), a decision sent without approval, or one task's part of a batch.

    ``id`` is the proposal's id, else the submission's. The times are the decision's steps:
    started (the wizard opened; the batch selected), proposed, approved, stored (the request
    kept before the first send: a direct decision is confirmed then), applied (the receipt),
    and settled (when ``outcome`` became final). For a retry, the new task and how it ended
    (``successor_state``: SUCCEEDED, FAILED, CANCELLED, or NEEDS_REVIEW again) once the
    follow-up saw it end (docs/events.md). ``evidence_links``: the namespace's evidence policy
    made a link of its evidence reference when the decision was made."""

    id = models.CharField(max_length=32, primary_key=True)
    proposal_id = models.CharField(max_length=32, blank=True, default="")
    submission_id = models.CharField(max_length=32, blank=True, default="")
    batch_id = models.CharField(max_length=32, blank=True, default="", db_index=True)
    namespace_id = models.CharField(max_length=64)
    queue_id = models.CharField(max_length=64, blank=True, default="")
    task_id = models.CharField(max_length=64)
    revision = models.PositiveBigIntegerField()
    action = models.CharField(max_length=8)  # review | retry
    declared = models.CharField(max_length=12, blank=True, default="")  # a review's outcome
    handler = models.CharField(max_length=HANDLER_CHARS, blank=True, default="")
    error_code = models.CharField(max_length=64, blank=True, default="")
    reason = models.TextField(blank=True, default="")
    evidence_ref = models.CharField(max_length=EVIDENCE_CHARS, blank=True, default="")
    evidence_links = models.BooleanField(default=False)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.PROTECT, related_name="+"
    )
    waiting_since = models.DateTimeField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    proposed_at = models.DateTimeField(null=True, blank=True)
    approved_at = models.DateTimeField(null=True, blank=True)
    stored_at = models.DateTimeField(null=True, blank=True)
    applied_at = models.DateTimeField(null=True, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=12, choices=Outcome.choices)
    successor_task_id = models.CharField(max_length=64, blank=True, default="")
    successor_state = models.CharField(max_length=16, blank=True, default="")
    successor_ended_at = models.DateTimeField(null=True, blank=True)
    recorded_at = models.DateTimeField()

    class Meta:
        indexes = [
            # Precedent (selectors.precedent): the settled decisions of one handler and error
            # code in a namespace, those whose evidence links first, newest first, by keyset.
            models.Index(
                fields=[
                    "namespace_id",
                    "handler",
                    "error_code",
                    "evidence_links",
                    "settled_at",
                    "id",
                ],
                name="insight_precedent",
            ),
            # The latest decision of a namespace (the stall alarm).
            models.Index(fields=["namespace_id", "recorded_at"], name="insight_latest_decision"),
        ]

    def __str__(self) -> str:
        return f"{self.action} of {self.task_id}@{self.revision}: {self.outcome}"

    @property
    def confirmed_at(self):  # type: ignore[no-untyped-def]
        """When its decider confirmed it: proposed, or stored to be sent."""
        return self.proposed_at or self.stored_at


class BatchApproval(models.TextChoices):
    APPROVED = "approved", "approved"
    REJECTED = "rejected", "rejected"
    EXPIRED = "expired", "expired without being approved"
    DISCARDED = "discarded", "discarded by its author"


class BatchFact(models.Model):
    """One batch (docs/bulk.md): selected, confirmed (proposed, or started at once), its
    proposal decided (``approval``), started, ended (``end``: finished or cancelled). Its
    tasks' own decisions are ``DecisionFact`` rows with its ``batch_id``."""

    id = models.CharField(max_length=32, primary_key=True)
    namespace_id = models.CharField(max_length=64)
    action = models.CharField(max_length=8)
    tasks = models.PositiveIntegerField(default=0)  # eligible when selected
    selected_at = models.DateTimeField()
    confirmed_at = models.DateTimeField(null=True, blank=True)
    proposed_at = models.DateTimeField(null=True, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    approval = models.CharField(
        max_length=12, choices=BatchApproval.choices, blank=True, default=""
    )
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    end = models.CharField(max_length=12, blank=True, default="")  # finished | cancelled

    def __str__(self) -> str:
        return f"batch {self.id}"


# --- Rollups (tallies.py) -------------------------------------------------------------------


class DecisionTally(models.Model):
    """How many decisions reached ``outcome`` (or a step: ``proposed``, ``approved``; a retry's
    new task's end: ``retry_succeeded``...; a batch's steps under the action ``batch``) in one
    UTC hour or day (``grain``, ``start``), per namespace and queue."""

    namespace_id = models.CharField(max_length=64)
    grain = models.CharField(max_length=1)
    start = models.DateTimeField()
    queue_id = models.CharField(max_length=64, blank=True, default="")
    action = models.CharField(max_length=8)
    outcome = models.CharField(max_length=24)
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace_id", "grain", "start", "queue_id", "action", "outcome"],
                name="insight_decision_tally",
            )
        ]

    def __str__(self) -> str:
        return f"{self.action} {self.outcome} {self.start:%Y-%m-%d %H}: {self.n}"


class PrecedentTally(models.Model):
    """How many decisions about tasks of one handler and last error code reached ``outcome``
    on one UTC day (``start``), per namespace and queue: precedent's counts."""

    namespace_id = models.CharField(max_length=64)
    handler = models.CharField(max_length=HANDLER_CHARS, blank=True, default="")
    error_code = models.CharField(max_length=64, blank=True, default="")
    start = models.DateTimeField()
    queue_id = models.CharField(max_length=64, blank=True, default="")
    action = models.CharField(max_length=8)
    outcome = models.CharField(max_length=24)
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "namespace_id",
                    "handler",
                    "error_code",
                    "start",
                    "queue_id",
                    "action",
                    "outcome",
                ],
                name="insight_precedent_tally",
            )
        ]

    def __str__(self) -> str:
        return f"{self.handler}/{self.error_code} {self.outcome} {self.start:%Y-%m-%d}: {self.n}"


class WaitTally(models.Model):
    """How many waiting periods of one handler, queue, error code and kind had ``event`` in one
    UTC hour or day: ``entered`` (what sends tasks to review), ``decided`` (the first decision
    started), ``ended_<how>``, and against a deadline ``decided_in_time`` / ``decided_late``."""

    namespace_id = models.CharField(max_length=64)
    grain = models.CharField(max_length=1)
    start = models.DateTimeField()
    handler = models.CharField(max_length=HANDLER_CHARS, blank=True, default="")
    queue_id = models.CharField(max_length=64, blank=True, default="")
    error_code = models.CharField(max_length=64, blank=True, default="")
    kind = models.CharField(max_length=8)
    event = models.CharField(max_length=16)
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=[
                    "namespace_id",
                    "grain",
                    "start",
                    "handler",
                    "queue_id",
                    "error_code",
                    "kind",
                    "event",
                ],
                name="insight_wait_tally",
            )
        ]

    def __str__(self) -> str:
        return f"{self.event} {self.handler} {self.start:%Y-%m-%d %H}: {self.n}"


class ClockTally(models.Model):
    """One bucket of a clock's sketch (``sketch.py``): how many of the clock's durations that
    ended in one UTC hour or day fell in ``bucket``, per namespace and queue. Sketches merge by
    adding their buckets: a p95 over 30 days is read from 30 days' buckets summed."""

    namespace_id = models.CharField(max_length=64)
    grain = models.CharField(max_length=1)
    start = models.DateTimeField()
    queue_id = models.CharField(max_length=64, blank=True, default="")
    clock = models.CharField(max_length=12)  # waiting | deciding | approving | batch
    bucket = models.SmallIntegerField()
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace_id", "grain", "start", "clock", "queue_id", "bucket"],
                name="insight_clock_tally",
            )
        ]

    def __str__(self) -> str:
        return f"{self.clock} {self.start:%Y-%m-%d %H} [{self.bucket}]: {self.n}"


class WaitingSample(models.Model):
    """The tasks of a namespace waiting at the start of one UTC hour, as the console knew
    them: taken at the hour's first change of what waits, before that change (so the set is
    the one the hour began with), exactly from the open ``Wait`` rows. An hour without a
    sample had no change: its tasks are the last sample's, each older by the time since."""

    namespace_id = models.CharField(max_length=64)
    hour = models.DateTimeField()
    count = models.PositiveIntegerField()
    capped = models.BooleanField(default=False)  # more than INSIGHT_WAITING_CAP: "≥ count"
    p50_ms = models.BigIntegerField(null=True)
    p95_ms = models.BigIntegerField(null=True)
    oldest_ms = models.BigIntegerField(null=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["namespace_id", "hour"], name="insight_sample_once")
        ]

    def __str__(self) -> str:
        return f"{self.namespace_id} {self.hour:%Y-%m-%d %H}: {self.count}"


class Backfill(models.Model):
    """The look at the tasks already in NEEDS_REVIEW when the console first consumed a
    subscription (``waiting.backfill``): done once per namespace and subscription."""

    namespace_id = models.CharField(max_length=64)
    subscription_id = models.CharField(max_length=64)
    listed = models.PositiveIntegerField()
    capped = models.BooleanField()
    opened = models.PositiveIntegerField()
    closed = models.PositiveIntegerField()
    done_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace_id", "subscription_id"], name="insight_backfill_once"
            )
        ]

    def __str__(self) -> str:
        return f"backfill of {self.namespace_id} ({self.subscription_id})"


# --- Objectives (objectives.py) -------------------------------------------------------------


class Objective(models.Model):
    """A waiting-time objective: a task parked in NEEDS_REVIEW in ``namespace_id`` — of
    ``handler``, or of any handler when it is empty — should have a decision started within
    ``decide_within`` of entering review. The deadline it gives is stored on the period when the
    task is parked (``Wait.deadline``; a handler's objective before its namespace's)."""

    namespace_id = models.CharField(max_length=64)
    handler = models.CharField(max_length=HANDLER_CHARS, blank=True, default="")
    decide_within = models.DurationField()
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace_id", "handler"], name="insight_objective_once"
            )
        ]

    def __str__(self) -> str:
        return f"{self.namespace_id}/{self.handler or '*'}: decide within {self.decide_within}"


class StallAlarm(models.Model):
    """A namespace's stall alarm: tasks wait in NEEDS_REVIEW and no decision has been made
    there for ``after`` — since the latest decision, or since the oldest of those tasks entered
    review if that is later. ``stalled_since``: the start of the stall told last, while it lasts
    (told once per stall)."""

    namespace_id = models.CharField(max_length=64, unique=True)
    after = models.DurationField()
    updated_at = models.DateTimeField()
    stalled_since = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.namespace_id}: stalled after {self.after}"
