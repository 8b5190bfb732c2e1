"""``orbit seed``: a fresh namespace with one task in every situation the recovery rules know.

Every call creates new ids, so it can run many times against one database. The output shape is
a contract with the console's demo, the tests and external acceptance checks: keep it stable.
"""

from typing import Any

from django.db import transaction

from orbit_console.ledger.lifecycle import (
    RetryPolicy,
    actor_id_for,
    attempt_finish,
    attempt_report_late,
    attempt_start,
    credential_issue,
    namespace_create,
    queue_create,
    task_accept,
    task_cancel,
    task_park_silent,
)
from orbit_console.ledger.models import (
    RECOVERY_PERMISSIONS,
    Attempt,
    AttemptOutcome,
    OwnerKind,
    Permission,
)
from orbit_console.lib.ids import new_id

PAYLOAD = '{"object_ref":"objects/input","sequence":9007199254740993}'
ALL: list[str] = [Permission.READ, Permission.REVIEW, Permission.RETRY, Permission.AUDIT_READ]
TOKEN_PERMISSIONS: dict[str, list[str]] = {
    "admin": [*ALL, Permission.SUBSCRIBE],
    "reviewer": [Permission.READ, Permission.REVIEW],
    "retrier": [Permission.READ, Permission.RETRY],
    "auditor": [Permission.READ, Permission.AUDIT_READ],
    "reader": [Permission.READ],
    # A consumer of the event stream: it reads what each event prompts it to read again.
    "subscriber": [Permission.READ, Permission.AUDIT_READ, Permission.SUBSCRIBE],
}


@transaction.atomic
def seed_world(*, label: str = "seed") -> dict[str, Any]:
    namespace, _ = namespace_create(name=f"{label} namespace")
    queue = queue_create(namespace=namespace, name="objects", capacity=1000)
    other_queue = queue_create(namespace=namespace, name="reports", capacity=1000)
    full_queue = queue_create(namespace=namespace, name="exports", capacity=2)
    other_namespace, _ = namespace_create(name=f"{label} other namespace")

    tokens: dict[str, str] = {}
    for name, permissions in TOKEN_PERMISSIONS.items():
        recovery = bool(set(permissions) & RECOVERY_PERMISSIONS)
        _, tokens[name] = credential_issue(
            namespace=namespace,
            actor_name=name,
            permissions=permissions,
            recovery_access=recovery,
        )
    _, tokens["other_queue"] = credential_issue(
        namespace=namespace,
        actor_name="other_queue",
        permissions=ALL,
        recovery_access=True,
        queues=[other_queue],
    )
    _, tokens["other_namespace"] = credential_issue(
        namespace=other_namespace,
        actor_name="other_namespace",
        permissions=ALL,
        recovery_access=True,
    )

    submitter = actor_id_for(namespace.id, "submitter")
    worker = actor_id_for(namespace.id, "worker-1")
    policy = RetryPolicy(max_attempts=1, attempt_timeout_ms=10_000)

    def accept(key: str, *, on: Any = queue, **fields: Any) -> Any:
        return task_accept(
            queue=on,
            actor_id=submitter,
            handler="object.prepare",
            payload=PAYLOAD,
            business_key=f"object:{key}",
            retry=policy,
            **fields,
        )

    def run(task: Any, outcome: str, **fields: Any) -> Any:
        attempt_start(task=task, worker_id="worker-1")
        return attempt_finish(task=task, worker_actor_id=worker, outcome=outcome, **fields)

    needs_review = run(accept("needs-review"), AttemptOutcome.UNKNOWN, error="connection reset")
    attempt_report_late(
        attempt=Attempt.objects.get(task_id=needs_review.id),
        outcome=AttemptOutcome.FAILED,
        detail="late report: the object store answered 503 after the lease ended",
    )
    needs_review_2 = run(accept("needs-review-2"), AttemptOutcome.UNKNOWN, error="timeout")

    leased = accept("needs-review-leased")
    attempt_start(task=leased, worker_id="worker-1", lease_ms=3_600_000)
    leased = task_park_silent(task=leased, actor_id=worker)

    workflow = run(
        accept("needs-review-workflow", owner_kind=OwnerKind.WORKFLOW, owner_id=new_id()),
        AttemptOutcome.UNKNOWN,
        error="timeout",
    )
    failed = run(accept("failed"), AttemptOutcome.FAILED, error="object not found")
    failed_uncertain = run(
        accept("failed-uncertain"),
        AttemptOutcome.FAILED,
        error="write may have reached the store",
        effect_uncertain=True,
    )
    cancelled = task_cancel(task=accept("cancelled"), actor_id=submitter, reason="superseded")
    succeeded = run(
        accept("succeeded"), AttemptOutcome.SUCCEEDED, result='{"object_ref":"objects/output"}'
    )

    queue_full_failed = run(accept("queue-full", on=full_queue), AttemptOutcome.FAILED, error="x")
    for index in range(full_queue.capacity):
        accept(f"queue-filler-{index}", on=full_queue)

    return {
        "namespace_id": namespace.id,
        "queue_id": queue.id,
        "tokens": tokens,
        "tasks": {
            "needs_review": needs_review.id,
            "needs_review_2": needs_review_2.id,
            "needs_review_leased": leased.id,
            "needs_review_workflow": workflow.id,
            "failed": failed.id,
            "failed_uncertain": failed_uncertain.id,
            "cancelled": cancelled.id,
            "succeeded": succeeded.id,
            "queue_full_failed": queue_full_failed.id,
        },
    }


@transaction.atomic
def demo_world(*, label: str) -> str:
    """The demo's world: everything ``seed_world`` makes, plus tasks of other handlers, a
    plan's task and an incident's 40, so that the console has something realistic to show."""
    from orbit_console.ledger.lifecycle import task_accept_for_plan
    from orbit_console.ledger.models import Queue

    world = seed_world(label=label)
    queue = Queue.objects.get(id=world["queue_id"])
    namespace_id = world["namespace_id"]
    submitter = actor_id_for(namespace_id, "submitter")
    worker = actor_id_for(namespace_id, "worker-2")

    def run(task: Any, outcome: str, **fields: Any) -> Any:
        attempt_start(task=task, worker_id="worker-2")
        return attempt_finish(task=task, worker_actor_id=worker, outcome=outcome, **fields)

    examples = [
        (
            "invoice.send",
            '{"invoice":"INV-2026-0042","amount":"129.90","currency":"EUR"}',
            "invoice:INV-2026-0042",
        ),
        (
            "payment.capture",
            '{"payment_id":"pay_81734","amount":1299000,"scale":4}',
            "payment:pay_81734",
        ),
        (
            "report.export",
            '{"report":"monthly-usage","month":"2026-10","rows":18442}',
            "report:monthly-usage:2026-10",
        ),
    ]
    for handler, payload, key in examples:
        task = task_accept(
            queue=queue, actor_id=submitter, handler=handler, payload=payload, business_key=key
        )
        run(task, AttemptOutcome.UNKNOWN, error="worker lost its connection to the broker")
    failed = task_accept(
        queue=queue,
        actor_id=submitter,
        handler="mail.deliver",
        payload='{"to":"ops@example.com","template":"weekly-digest"}',
        business_key="mail:weekly-digest:2026-48",
    )
    run(failed, AttemptOutcome.FAILED, error="SMTP 451: try again later")
    planned = task_accept_for_plan(
        queue=queue,
        actor_id=submitter,
        plan_name="nightly cleanup",
        handler="storage.cleanup",
        payload='{"bucket":"tmp","older_than_days":7}',
        business_key="cleanup:tmp:2026-11-28",
    )
    run(planned, AttemptOutcome.UNKNOWN, error="timeout after 10 s")
    # An incident: a broker outage parked these at once (for a batch, docs/bulk.md).
    seed_incident(
        namespace_id=namespace_id,
        queue_id=queue.id,
        count=40,
        label="order-sync",
        error="broker outage: channel closed before the ack",
    )
    return namespace_id


@transaction.atomic
def seed_incident(
    *, namespace_id: str, queue_id: str, count: int, label: str = "incident", error: str = ""
) -> list[str]:
    """``count`` tasks an incident left in NEEDS_REVIEW (an attempt with an UNKNOWN outcome
    and ``error``), business keys ``<label>:<n>``, for batches (docs/bulk.md). Their ids."""
    from orbit_console.ledger.models import Queue

    queue = Queue.objects.get(id=queue_id, namespace_id=namespace_id)
    submitter = actor_id_for(namespace_id, "submitter")
    worker = actor_id_for(namespace_id, "worker-1")
    policy = RetryPolicy(max_attempts=1, attempt_timeout_ms=10_000)
    ids = []
    for index in range(count):
        task = task_accept(
            queue=queue,
            actor_id=submitter,
            handler="object.prepare",
            payload=PAYLOAD,
            business_key=f"{label}:{index}",
            retry=policy,
        )
        attempt_start(task=task, worker_id="worker-1")
        task = attempt_finish(
            task=task,
            worker_actor_id=worker,
            outcome=AttemptOutcome.UNKNOWN,
            error=error or "broker connection lost",
        )
        ids.append(task.id)
    return ids
