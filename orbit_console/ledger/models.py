"""The embedded Orbit task ledger.

Tables that belong to tasks refer to each other by plain 32-hex id columns, not database
foreign keys (RT6): ownership and existence are checked inside each transaction, and the unique
index on ``(namespace_id, retry_of)`` is the backstop for the one-successor rule. JSON payloads
and results are stored as the exact text received (RV3, I8).
"""

from django.db import models
from django.db.models import F, Q

from orbit_console.lib.ids import new_id


def _id_field(**kwargs: object) -> models.CharField:
    return models.CharField(max_length=32, **kwargs)  # type: ignore[arg-type]


class Namespace(models.Model):
    """An isolation boundary: every queue, task, credential and audit record lives in one."""

    id = _id_field(primary_key=True, default=new_id, editable=False)
    name = models.CharField(max_length=200)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.name} ({self.id})"


class Application(models.Model):
    """A tenant that submits tasks. ``quota`` bounds its non-terminal tasks (RT7);
    disabling it refuses every credential it issued (C1)."""

    id = _id_field(primary_key=True, default=new_id, editable=False)
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="applications")
    name = models.CharField(max_length=200)
    enabled = models.BooleanField(default=True)
    quota = models.PositiveBigIntegerField()
    in_use = models.PositiveBigIntegerField(default=0)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(in_use__lte=F("quota")), name="application_in_quota"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Queue(models.Model):
    """Where tasks wait for workers. ``capacity`` bounds its non-terminal tasks (RT7)."""

    id = _id_field(primary_key=True, default=new_id, editable=False)
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="queues")
    name = models.CharField(max_length=200)
    capacity = models.PositiveBigIntegerField()
    in_use = models.PositiveBigIntegerField(default=0)
    paused = models.BooleanField(default=False)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(in_use__lte=F("capacity")), name="queue_in_capacity"
            ),
        ]

    def __str__(self) -> str:
        return self.name


class Permission(models.TextChoices):
    READ = "tasks:read"
    REVIEW = "tasks:review"
    RETRY = "tasks:retry"
    AUDIT_READ = "tasks:audit:read"
    # Managing and reading event subscriptions (docs/events.md); not a recovery permission.
    SUBSCRIBE = "events:subscribe"


RECOVERY_PERMISSIONS = frozenset({Permission.REVIEW, Permission.RETRY, Permission.AUDIT_READ})


class Credential(models.Model):
    """A bearer token of one actor, limited to a namespace and optionally to some queues.

    Only a SHA-256 hash of the token is stored; the token itself is shown once, when issued.
    """

    id = _id_field(primary_key=True, default=new_id, editable=False)
    namespace = models.ForeignKey(Namespace, on_delete=models.PROTECT, related_name="credentials")
    application = models.ForeignKey(
        Application, on_delete=models.PROTECT, related_name="credentials"
    )
    actor_id = _id_field()
    actor_name = models.CharField(max_length=200)
    token_hash = models.CharField(max_length=64, unique=True)
    # Space-separated ``Permission`` values.
    permissions = models.CharField(max_length=200)
    # Empty: the whole namespace. Otherwise only these queues.
    queues = models.ManyToManyField(Queue, blank=True, related_name="+")
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.actor_name} ({self.id})"

    @property
    def permission_set(self) -> frozenset[str]:
        return frozenset(self.permissions.split())


class TaskState(models.TextChoices):
    WAITING = "WAITING"
    RUNNING = "RUNNING"
    NEEDS_REVIEW = "NEEDS_REVIEW"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL_STATES = frozenset({TaskState.SUCCEEDED, TaskState.FAILED, TaskState.CANCELLED})


class OwnerKind(models.TextChoices):
    NONE = "NONE"
    PLAN = "PLAN"
    WORKFLOW = "WORKFLOW"


class Task(models.Model):
    """One unit of work and its whole lifecycle state.

    Besides the fields of the seed's task JSON it records who owns it (nobody, a plan and its
    trigger, or a workflow), a gate, the current lease, the active attempt, an unreleased
    permit and ``effect_uncertain`` — everything the recovery rules look at (RV1, RV2, RT1).
    """

    id = _id_field(primary_key=True, default=new_id, editable=False)
    namespace_id = _id_field()
    queue_id = _id_field()
    application_id = _id_field()
    state = models.CharField(max_length=16, choices=TaskState.choices)
    revision = models.PositiveBigIntegerField()
    handler = models.CharField(max_length=200)
    handler_version = models.CharField(max_length=64)
    payload_version = models.CharField(max_length=64)
    payload = models.TextField()
    business_key = models.CharField(max_length=512, blank=True)
    concurrency_key = models.CharField(max_length=512, blank=True)
    priority = models.IntegerField(default=0)
    recovery_safety = models.CharField(max_length=32)
    retry_max_attempts = models.PositiveIntegerField()
    retry_initial_delay_ms = models.PositiveBigIntegerField()
    retry_max_delay_ms = models.PositiveBigIntegerField()
    retry_attempt_timeout_ms = models.PositiveBigIntegerField()
    attempt_count = models.PositiveIntegerField(default=0)
    result = models.TextField(null=True, blank=True)  # noqa: DJ001 -- NULL: no result yet
    available_at = models.DateTimeField()
    start_deadline_at = models.DateTimeField(null=True, blank=True)
    deadline_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    updated_at = models.DateTimeField()
    retry_of = _id_field(null=True, blank=True)
    owner_kind = models.CharField(max_length=16, choices=OwnerKind.choices, default=OwnerKind.NONE)
    owner_id = _id_field(null=True, blank=True)
    trigger_id = _id_field(null=True, blank=True)
    gate_id = _id_field(null=True, blank=True)
    lease_id = _id_field(null=True, blank=True)
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    active_attempt_id = _id_field(null=True, blank=True)
    permit_id = _id_field(null=True, blank=True)
    effect_uncertain = models.BooleanField(default=False)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace_id", "retry_of"], name="task_one_retry_successor"
            ),
            models.CheckConstraint(condition=~Q(retry_of=F("id")), name="task_retry_of_not_self"),
        ]
        indexes = [
            models.Index(fields=["namespace_id", "created_at", "id"], name="task_ns_created"),
            models.Index(
                fields=["namespace_id", "state", "created_at", "id"], name="task_ns_state_created"
            ),
            models.Index(fields=["namespace_id", "business_key"], name="task_ns_business_key"),
            # The task list by last update (selectors.TASK_ORDERS), at any depth as by creation.
            models.Index(fields=["namespace_id", "updated_at", "id"], name="task_ns_updated"),
            models.Index(
                fields=["namespace_id", "state", "updated_at", "id"], name="task_ns_state_updated"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.handler} {self.state} ({self.id})"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES


class AttemptOutcome(models.TextChoices):
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    UNKNOWN = "UNKNOWN"


class Attempt(models.Model):
    """One execution of a task by a worker. Never rewritten once ended (RV6)."""

    id = _id_field(primary_key=True, default=new_id, editable=False)
    task_id = _id_field()
    number = models.PositiveIntegerField()
    worker_id = models.CharField(max_length=200)
    started_at = models.DateTimeField()
    ended_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=16, choices=AttemptOutcome.choices, null=True, blank=True)  # noqa: DJ001 -- NULL: running
    error = models.TextField(blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task_id", "number"], name="attempt_number_unique"),
        ]

    def __str__(self) -> str:
        return f"attempt {self.number} of {self.task_id}"


class AttemptReport(models.Model):
    """A report about an attempt that arrived after it had ended: appended evidence (RV6)."""

    id = _id_field(primary_key=True, default=new_id, editable=False)
    attempt_id = _id_field(db_index=True)
    task_id = _id_field()
    outcome = models.CharField(max_length=16, choices=AttemptOutcome.choices)
    detail = models.TextField(blank=True)
    received_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"late report on {self.attempt_id}"


class Plan(models.Model):
    """A schedule that creates tasks through triggers; it owns the tasks it created."""

    id = _id_field(primary_key=True, default=new_id, editable=False)
    namespace_id = _id_field()
    name = models.CharField(max_length=200)
    serial = models.BooleanField(default=False)
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return self.name


class PlanTrigger(models.Model):
    """The record of one firing of a plan and the task it created (RV2)."""

    id = _id_field(primary_key=True, default=new_id, editable=False)
    plan_id = _id_field(db_index=True)
    task_id = _id_field(unique=True)
    fired_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"trigger {self.id} of plan {self.plan_id}"


class OperationAudit(models.Model):
    """One immutable record of an operation on one task (AU).

    ``before`` and ``after`` are JSON text. Records are only ever inserted. The records of a
    task form a hash chain: ``seq`` numbers them from 1, ``prev_hash`` is the ``entry_hash`` of
    the record before (empty for the first) and ``entry_hash`` covers this record's canonical
    content and ``prev_hash``, so that an edited or removed record breaks the chain. The hash is
    an HMAC under the audit key ``key_id`` names (``lib/auditkeys.py``): without the key, no
    one can link a changed record back in.
    """

    id = _id_field(primary_key=True, default=new_id, editable=False)
    namespace_id = _id_field()
    task_id = _id_field()
    seq = models.PositiveIntegerField()
    operation_id = _id_field()
    actor_id = _id_field()
    action = models.CharField(max_length=64)
    reason = models.TextField(blank=True)
    evidence_ref = models.CharField(max_length=2048, null=True, blank=True)  # noqa: DJ001
    before = models.TextField()
    after = models.TextField()
    created_at = models.DateTimeField()
    prev_hash = models.CharField(max_length=64, blank=True)
    entry_hash = models.CharField(max_length=64)
    key_id = models.CharField(max_length=16, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["task_id", "seq"], name="audit_task_seq"),
        ]
        indexes = [
            models.Index(fields=["task_id", "created_at", "id"], name="audit_task_created"),
            models.Index(fields=["created_at"], name="audit_created"),
        ]

    def __str__(self) -> str:
        return f"{self.action} on {self.task_id}"


class IdempotencyRecord(models.Model):
    """The stored receipt of a write, answering replays of the same request (C7, C8).

    The scope is namespace + action + source task + key; the key is matched through its
    SHA-256 so that the comparison is exact whatever the database collation.
    """

    id = _id_field(primary_key=True, default=new_id, editable=False)
    namespace_id = _id_field()
    action = models.CharField(max_length=16)
    task_id = _id_field()
    key_digest = models.CharField(max_length=64)
    request_digest = models.CharField(max_length=64)
    status_code = models.PositiveSmallIntegerField()
    audit_id = _id_field()
    # The receipt's task detail as JSON text, a snapshot of that moment (C9).
    response_task = models.TextField()
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["namespace_id", "action", "task_id", "key_digest"], name="idempotency_scope"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.action} on {self.task_id}"


class TaskEvent(models.Model):
    """One event of a task's life, for subscribers of the event stream (I3, docs/events.md).

    Written in the transaction of the change it reports and frozen once written:
    ``task.accepted`` for every new task (a retry successor's ``detail`` holds ``retry_of`` and
    the retry's ``retry_audit_id``: RT9), ``task.needs_review`` when a task is parked and
    ``task.completed`` when it reaches a terminal state. The last two are the result events: they
    keep the task's ``result`` at that revision, and a review adds a new one at the new revision
    instead of changing the earlier needs-review event (RV5, RV6).

    ``operation`` is the audit action of the operation that caused the event (a recovery shows
    as ``task.review`` on a completion, or as a successor's acceptance), and ``audit_id`` names
    its record on this event's own task. ``sequence`` orders the events as they were written;
    the event stream hands them out per subscription (``orbit_console/events``).
    """

    sequence = models.BigAutoField(primary_key=True)
    event_id = _id_field(unique=True, default=new_id, editable=False)
    namespace_id = _id_field()
    queue_id = _id_field(default="")
    task_id = _id_field(db_index=True)
    kind = models.CharField(max_length=32)
    state = models.CharField(max_length=16, choices=TaskState.choices)
    revision = models.PositiveBigIntegerField()
    result = models.TextField(null=True, blank=True)  # noqa: DJ001
    operation = models.CharField(max_length=64, default="")
    audit_id = _id_field(default="")
    # JSON text: what an event of this kind carries besides the common fields.
    detail = models.TextField(default="{}")
    created_at = models.DateTimeField()

    def __str__(self) -> str:
        return f"{self.kind} {self.task_id}@{self.revision}"
