"""The rest of a task's life in the embedded ledger: tenants, credentials, acceptance,
execution and cancellation.

The recovery API does not expose these (submission and the worker protocol are outside the
seeds' recovery chapter); the ``orbit`` management command, the demo and the tests use them to
build worlds whose tasks carry a real history. Each function is one transaction and writes the
same audit records, quota accounting and result events a full Orbit would.
"""

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from orbit_console.ledger.auth import hash_token, new_token
from orbit_console.ledger.journal import (
    TASK_ACCEPTED,
    TASK_COMPLETED,
    TASK_NEEDS_REVIEW,
    hold_quota,
    record_event,
    release_quota,
    take_quota,
    write_audit,
)
from orbit_console.ledger.models import (
    RECOVERY_PERMISSIONS,
    Application,
    Attempt,
    AttemptOutcome,
    AttemptReport,
    Credential,
    Namespace,
    OwnerKind,
    Permission,
    Plan,
    PlanTrigger,
    Queue,
    Task,
    TaskState,
)
from orbit_console.ledger.services import ACCEPTED, CANCELLED, EXECUTION_RESULT
from orbit_console.lib import strictjson
from orbit_console.lib.ids import new_id
from orbit_console.lib.namespaces import Namespaces


def actor_id_for(namespace_id: str, actor_name: str) -> str:
    """A stable actor id for a name within a namespace: every credential issued to the same
    name acts as the same actor, so rotating a token keeps the audit trail's identity."""
    return hashlib.sha256(f"{namespace_id}:{actor_name}".encode()).hexdigest()[:32]


# --- Tenants and credentials ------------------------------------------------------------------


@transaction.atomic
def namespace_create(*, name: str, application_quota: int = 1000) -> tuple[Namespace, Application]:
    now = timezone.now()
    namespace = Namespace.objects.create(name=name, created_at=now)
    application = Application.objects.create(
        namespace=namespace, name="default", quota=application_quota, created_at=now
    )
    return namespace, application


def namespace_names() -> list[tuple[str, str]]:
    """(id, name) of every namespace of the ledger, oldest first: what commands know them by."""
    return list(Namespace.objects.order_by("created_at").values_list("id", "name"))


def namespace_named(named: str) -> Namespace:
    """The namespace an administrator named by its id or exact name (``lib/namespaces.py``:
    ``NamespaceNotFound`` when none or several go by it)."""
    return Namespace.objects.get(id=Namespaces(namespace_names()).id_of(named))


def queue_create(*, namespace: Namespace, name: str, capacity: int) -> Queue:
    return Queue.objects.create(
        namespace=namespace, name=name, capacity=capacity, created_at=timezone.now()
    )


class CredentialError(ValueError):
    pass


@transaction.atomic
def credential_issue(
    *,
    namespace: Namespace,
    actor_name: str,
    permissions: Iterable[str],
    recovery_access: bool = False,
    queues: Iterable[Queue] = (),
    application: Application | None = None,
    expires_at: datetime | None = None,
) -> tuple[Credential, str]:
    """Issue a credential and return it with its token, which is not stored and cannot be
    shown again. Recovery permissions need ``recovery_access`` (C3): default submit and worker
    credentials never hold them by accident."""
    wanted = set(permissions)
    unknown = wanted - set(Permission.values)
    if unknown:
        raise CredentialError(f"unknown permission(s): {', '.join(sorted(unknown))}")
    if wanted & RECOVERY_PERMISSIONS and not recovery_access:
        raise CredentialError(
            "tasks:review, tasks:retry and tasks:audit:read need the explicit recovery access flag"
        )
    if recovery_access and not wanted & RECOVERY_PERMISSIONS:
        wanted |= RECOVERY_PERMISSIONS
    if not actor_name.strip():
        raise CredentialError("the actor needs a name")
    queues = list(queues)
    if any(queue.namespace_id != namespace.id for queue in queues):
        raise CredentialError("every queue must belong to the credential's namespace")
    application = application or namespace.applications.order_by("created_at").first()
    if application is None or application.namespace_id != namespace.id:
        raise CredentialError("the namespace has no application to issue the credential for")
    token = new_token()
    credential = Credential.objects.create(
        namespace=namespace,
        application=application,
        actor_id=actor_id_for(namespace.id, actor_name),
        actor_name=actor_name,
        token_hash=hash_token(token),
        permissions=" ".join(sorted(wanted)),
        expires_at=expires_at,
        created_at=timezone.now(),
    )
    credential.queues.set(queues)
    return credential, token


@transaction.atomic
def credential_revoke(*, credential: Credential) -> None:
    Credential.objects.filter(id=credential.id, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )


# --- Tasks ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_attempts: int = 1
    initial_delay_ms: int = 0
    max_delay_ms: int = 0
    attempt_timeout_ms: int = 10_000


@transaction.atomic
def task_accept(
    *,
    queue: Queue,
    actor_id: str,
    handler: str,
    payload: str,
    business_key: str = "",
    handler_version: str = "v1",
    payload_version: str = "v1",
    concurrency_key: str = "",
    priority: int = 0,
    recovery_safety: str = "RECONCILE_ONLY",
    retry: RetryPolicy = RetryPolicy(),
    task_timeout_ms: int = 60_000,
    owner_kind: str = OwnerKind.NONE,
    owner_id: str | None = None,
    gate_id: str | None = None,
) -> Task:
    """Accept a task into a queue: quota taken, revision 1, ``task.accepted`` audited (O2)."""
    strictjson.loads(payload)  # refuse a payload that is not JSON
    now = timezone.now()
    task = Task(
        id=new_id(),
        namespace_id=queue.namespace_id,
        queue_id=queue.id,
        application_id="",
        state=TaskState.WAITING,
        revision=1,
        handler=handler,
        handler_version=handler_version,
        payload_version=payload_version,
        payload=payload,
        business_key=business_key,
        concurrency_key=concurrency_key,
        priority=priority,
        recovery_safety=recovery_safety,
        retry_max_attempts=retry.max_attempts,
        retry_initial_delay_ms=retry.initial_delay_ms,
        retry_max_delay_ms=retry.max_delay_ms,
        retry_attempt_timeout_ms=retry.attempt_timeout_ms,
        available_at=now,
        deadline_at=now + timedelta(milliseconds=task_timeout_ms),
        created_at=now,
        updated_at=now,
        owner_kind=owner_kind,
        owner_id=owner_id,
        gate_id=gate_id,
    )
    application = Application.objects.filter(namespace_id=queue.namespace_id).order_by("created_at")
    task.application_id = application.values_list("id", flat=True).first() or ""
    take_quota(task)
    task.save(force_insert=True)
    hold_quota(task)
    audit = write_audit(
        task=task,
        operation_id=new_id(),
        actor_id=actor_id,
        action=ACCEPTED,
        reason="",
        evidence_ref=None,
        before=None,
        after={"state": task.state, "revision": "1"},
        now=now,
    )
    record_event(task, kind=TASK_ACCEPTED, audit=audit, now=now)
    return task


@transaction.atomic
def task_accept_for_plan(*, queue: Queue, actor_id: str, plan_name: str, **fields: object) -> Task:
    """Accept a task that a plan's trigger fired: the plan and its trigger record own it."""
    now = timezone.now()
    plan = Plan.objects.create(namespace_id=queue.namespace_id, name=plan_name, created_at=now)
    task = task_accept(
        queue=queue,
        actor_id=actor_id,
        owner_kind=OwnerKind.PLAN,
        owner_id=plan.id,
        **fields,  # type: ignore[arg-type]
    )
    trigger = PlanTrigger.objects.create(plan_id=plan.id, task_id=task.id, fired_at=now)
    Task.objects.filter(id=task.id).update(trigger_id=trigger.id)
    task.trigger_id = trigger.id
    return task


def _locked(task: Task) -> Task:
    return Task.objects.select_for_update().get(id=task.id)


@transaction.atomic
def attempt_start(*, task: Task, worker_id: str, lease_ms: int = 30_000) -> Attempt:
    """A worker leases the task and starts an attempt; the task holds a permit while it runs."""
    task = _locked(task)
    if task.state != TaskState.WAITING:
        raise ValueError(f"cannot start an attempt of a {task.state} task")
    now = timezone.now()
    attempt = Attempt.objects.create(
        task_id=task.id, number=task.attempt_count + 1, worker_id=worker_id, started_at=now
    )
    Task.objects.filter(id=task.id).update(
        state=TaskState.RUNNING,
        revision=F("revision") + 1,
        attempt_count=F("attempt_count") + 1,
        lease_id=new_id(),
        lease_expires_at=now + timedelta(milliseconds=lease_ms),
        active_attempt_id=attempt.id,
        permit_id=new_id(),
        updated_at=now,
    )
    return attempt


@transaction.atomic
def attempt_finish(
    *,
    task: Task,
    worker_actor_id: str,
    outcome: str,
    result: str | None = None,
    error: str = "",
    effect_uncertain: bool = False,
) -> Task:
    """The active attempt reports its outcome. UNKNOWN parks the task in NEEDS_REVIEW with
    ``effect_uncertain``; SUCCEEDED and FAILED end it and give back its quota."""
    task = _locked(task)
    if task.active_attempt_id is None:
        raise ValueError("the task has no active attempt")
    if result is not None:
        strictjson.loads(result)
    now = timezone.now()
    Attempt.objects.filter(id=task.active_attempt_id).update(
        ended_at=now, outcome=outcome, error=error
    )
    before = {"state": task.state, "revision": str(task.revision)}
    parked = outcome == AttemptOutcome.UNKNOWN
    task.state = TaskState.NEEDS_REVIEW if parked else outcome
    task.effect_uncertain = parked or effect_uncertain
    task.result = result
    task.revision += 1
    task.lease_id = task.lease_expires_at = task.active_attempt_id = task.permit_id = None
    task.updated_at = now
    if not parked:
        task.completed_at = now
    task.save()
    if not parked:
        release_quota(task)
    audit = write_audit(
        task=task,
        operation_id=new_id(),
        actor_id=worker_actor_id,
        action=EXECUTION_RESULT,
        reason=error,
        evidence_ref=None,
        before=before,
        after={
            "state": task.state,
            "revision": str(task.revision),
            "effect_uncertain": task.effect_uncertain,
            "attempt_outcome": outcome,
        },
        now=now,
    )
    record_event(task, kind=TASK_NEEDS_REVIEW if parked else TASK_COMPLETED, audit=audit, now=now)
    return task


@transaction.atomic
def task_park_silent(*, task: Task, actor_id: str) -> Task:
    """The platform parks a running task whose worker went silent: the outcome is unknown, the
    lease and the attempt are still held (an expired lease alone proves nothing)."""
    task = _locked(task)
    if task.state != TaskState.RUNNING:
        raise ValueError(f"cannot park a {task.state} task")
    now = timezone.now()
    before = {"state": task.state, "revision": str(task.revision)}
    task.state = TaskState.NEEDS_REVIEW
    task.effect_uncertain = True
    task.revision += 1
    task.updated_at = now
    task.save()
    audit = write_audit(
        task=task,
        operation_id=new_id(),
        actor_id=actor_id,
        action=EXECUTION_RESULT,
        reason="the worker stopped reporting; its lease is still held",
        evidence_ref=None,
        before=before,
        after={
            "state": task.state,
            "revision": str(task.revision),
            "effect_uncertain": True,
            "attempt_outcome": AttemptOutcome.UNKNOWN,
        },
        now=now,
    )
    record_event(task, kind=TASK_NEEDS_REVIEW, audit=audit, now=now)
    return task


@transaction.atomic
def attempt_report_late(*, attempt: Attempt, outcome: str, detail: str) -> AttemptReport:
    """A report about an ended attempt: appended as evidence, nothing rewritten (RV6)."""
    if attempt.ended_at is None:
        raise ValueError("the attempt has not ended; it reports through its lease")
    return AttemptReport.objects.create(
        attempt_id=attempt.id,
        task_id=attempt.task_id,
        outcome=outcome,
        detail=detail,
        received_at=timezone.now(),
    )


@transaction.atomic
def task_cancel(*, task: Task, actor_id: str, reason: str) -> Task:
    """Cancel a task that is not running: it becomes CANCELLED and gives back its quota."""
    task = _locked(task)
    if task.state != TaskState.WAITING:
        raise ValueError(f"cannot cancel a {task.state} task")
    now = timezone.now()
    before = {"state": task.state, "revision": str(task.revision)}
    task.state = TaskState.CANCELLED
    task.revision += 1
    task.completed_at = task.updated_at = now
    task.save()
    release_quota(task)
    audit = write_audit(
        task=task,
        operation_id=new_id(),
        actor_id=actor_id,
        action=CANCELLED,
        reason=reason,
        evidence_ref=None,
        before=before,
        after={"state": task.state, "revision": str(task.revision)},
        now=now,
    )
    record_event(task, kind=TASK_COMPLETED, audit=audit, now=now)
    return task


# --- The demo's worker ------------------------------------------------------------------------

DEMO_WORKER = "demo-worker"


def demo_work_round(namespace_id: str, *, after: timedelta) -> int:
    """One round of a stand-in for Orbit's workers (``orbit work``, the demo): the new tasks
    manual retries created start once they have waited ``after``, and report once they have run
    as long — most SUCCEEDED, one in ten FAILED and one in ten UNKNOWN (parked in NEEDS_REVIEW
    again), by their id, so that the console's follow-ups have every ending to show. Other
    tasks are left as the demo world made them. The number of steps taken."""
    now = timezone.now()
    actor = actor_id_for(namespace_id, DEMO_WORKER)
    retries = Task.objects.filter(namespace_id=namespace_id, retry_of__isnull=False)
    steps = 0
    for task in retries.filter(state=TaskState.WAITING, available_at__lte=now - after)[:20]:
        attempt_start(task=task, worker_id=DEMO_WORKER)
        steps += 1
    started = Attempt.objects.filter(
        task_id__in=retries.filter(state=TaskState.RUNNING).values("id"),
        worker_id=DEMO_WORKER,
        ended_at__isnull=True,
        started_at__lte=now - after,
    )
    for attempt in started[:20]:
        task = Task.objects.get(id=attempt.task_id)
        roll = int(task.id[-2:], 16) % 10
        if roll == 0:
            attempt_finish(task=task, worker_actor_id=actor, outcome=AttemptOutcome.UNKNOWN)
        elif roll == 1:
            attempt_finish(
                task=task, worker_actor_id=actor, outcome=AttemptOutcome.FAILED, error="demo"
            )
        else:
            attempt_finish(
                task=task, worker_actor_id=actor, outcome=AttemptOutcome.SUCCEEDED, result="{}"
            )
        steps += 1
    return steps
