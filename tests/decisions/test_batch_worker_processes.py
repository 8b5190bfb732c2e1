"""The batch worker as a real process (issue 16): killed mid-batch and started again, every
item ends sent exactly once — one review per task in the ledger (C7, C9)."""

import subprocess
import sys
import time
from typing import Any

from django.conf import settings

from orbit_console.decisions import batches
from orbit_console.decisions.models import Batch, BatchItem, BatchState, ItemOutcome
from orbit_console.ledger.models import OperationAudit
from orbit_console.ledger.seed import seed_incident
from tests.decisions.test_batches import DECISION, select
from tests.support.people import TestPerson
from tests.support.servers import child_env


def start_worker(**env: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "reconcile", "--interval", "0.5"],
        cwd=settings.BASE_DIR,
        env=child_env(**env),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def settled(batch: Batch) -> int:
    return BatchItem.objects.filter(batch=batch).exclude(outcome="").count()


def wait_for(check: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_a_worker_killed_mid_batch_and_started_again_sends_each_item_exactly_once(
    world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    incident = seed_incident(
        namespace_id=world["namespace_id"], queue_id=world["queue_id"], count=40, label="kill"
    )
    supervisor = people["supervisor"]
    batch = select(world, supervisor, incident)
    batches.batch_decide(batch, person=supervisor.user, decision=DECISION)
    batches.batch_submit(batch, person=supervisor.user, typed_count=40)

    # Slowly, so that it dies with the batch half done (and sends in flight).
    first = start_worker(CONSOLE_BATCH_RATE="10", CONSOLE_BATCH_CLAIM_SECONDS="2")
    try:
        wait_for(lambda: settled(batch) >= 8, timeout=120)
    finally:
        first.kill()
        first.wait()
    assert settled(batch) < 40

    second = start_worker(CONSOLE_BATCH_CLAIM_SECONDS="2")
    try:
        wait_for(lambda: Batch.objects.get(id=batch.id).state == BatchState.FINISHED, 120)
    finally:
        second.terminate()
        second.wait(timeout=30)

    outcomes = set(BatchItem.objects.filter(batch=batch).values_list("outcome", flat=True))
    assert outcomes <= {ItemOutcome.APPLIED, ItemOutcome.DEDUPLICATED}
    for task_id in incident:
        assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1
