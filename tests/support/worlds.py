"""Seeded worlds shared by a module's tests, with tasks of each test's own.

``orbit seed`` (``seed_world``) makes a namespace, three queues, nine credentials and thirteen
tasks: about a third of a second of database work. A module of hundreds of tests that each
refuse a request and then make one valid one (``tests/ledger/test_bad_input.py``) needs none of
that anew, only a task that no other test has touched: ``with_fresh_tasks`` gives a test the
shared world with the tasks it works on made for it, exactly as the seed makes them (the same
handler, payload, retry policy and revisions: accepted 1, started 2, parked or failed 3).
"""

from typing import Any

from orbit_console.ledger.lifecycle import (
    RetryPolicy,
    actor_id_for,
    attempt_finish,
    attempt_start,
    task_accept,
)
from orbit_console.ledger.models import AttemptOutcome, Queue
from orbit_console.ledger.seed import PAYLOAD
from orbit_console.lib.ids import new_id

_OUTCOMES = {"needs_review": AttemptOutcome.UNKNOWN, "failed": AttemptOutcome.FAILED}


def new_task(world: dict[str, Any], situation: str) -> str:
    """A new task of ``world``'s first queue in ``situation`` (``needs_review`` or ``failed``),
    at revision 3 like the seed's."""
    namespace_id = world["namespace_id"]
    queue = Queue.objects.get(id=world["queue_id"], namespace_id=namespace_id)
    task = task_accept(
        queue=queue,
        actor_id=actor_id_for(namespace_id, "submitter"),
        handler="object.prepare",
        payload=PAYLOAD,
        business_key=f"object:{situation}-{new_id()}",
        retry=RetryPolicy(max_attempts=1, attempt_timeout_ms=10_000),
    )
    attempt_start(task=task, worker_id="worker-1")
    task = attempt_finish(
        task=task,
        worker_actor_id=actor_id_for(namespace_id, "worker-1"),
        outcome=_OUTCOMES[situation],
        error="connection reset",
    )
    return str(task.id)


def with_fresh_tasks(world: dict[str, Any], *situations: str) -> dict[str, Any]:
    """``world`` with its tasks of these ``situations`` (``needs_review``, ``failed``) replaced
    by new ones."""
    fresh = {situation: new_task(world, situation) for situation in situations}
    return {**world, "tasks": {**world["tasks"], **fresh}}
