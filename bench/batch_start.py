"""How long approving a large batch holds its locks, and what it makes an unrelated write wait
(issue 29).

    uv run python bench/batch_start.py [--tasks 2005]
        [--database-url mysql://root@127.0.0.1:3306/orbit_bench] [--label NAME]

What it does:

1. A fresh database (an SQLite file under ``var/bench/``, or the MySQL/MariaDB database named
   in ``--database-url``, dropped and created again; its name must contain "bench"), migrated.
2. In this process (Django set up on the same database), approval required: ``orbit seed``'s
   world with N tasks in NEEDS_REVIEW, an operator and a supervisor; a second namespace with
   one more person. The operator selects the N tasks (read through the API), decides a review
   with a result template and proposes the batch.
3. A writer thread, on a connection of its own, stores a decision in the second namespace
   every 20 ms (``submission_create``: a row and an entry of the console's record, as any
   decision anywhere does), and times each.
4. The supervisor approves the batch, as the page does: ``batch_approve``, then, where the
   code has it, ``batch_store_next`` until every submission is stored. Each of these is one
   transaction, timed. Before issue 29 ``batch_approve`` alone stored every submission.

Reported: the approval from the click to the batch running, the number of transactions and the
longest, and the writer's writes while the approval ran (the longest wait). The load average
is read before and after. Results on stdout and in ``var/bench/batch_start[-<label>].json``;
written up in docs/performance.md ("Batches"). Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import threading
import time
from typing import Any

from support import BENCH_DIR, fresh_database, loadavg, machine, manage, setup_django


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=2005)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    os.environ["CONSOLE_REVIEW_APPROVAL"] = "required"
    database_url = fresh_database(args.database_url or None, "batch_start.sqlite3")
    manage(database_url, "migrate", "--noinput")
    setup_django(database_url)

    import asyncio

    from asgiref.sync import async_to_sync
    from django.conf import settings
    from django.contrib.auth.models import User
    from django.db import connection
    from support import needs_review_tasks

    from orbit_console.decisions import batches
    from orbit_console.decisions.models import Batch, BatchState, Submission
    from orbit_console.decisions.submissions import submission_create
    from orbit_console.ledger.seed import seed_world
    from orbit_console.people.credentials import person_enroll
    from orbit_console.people.models import OrbitCredential
    from orbit_console.people.person import orbit_client

    def person(role: str, namespace_id: str) -> User:
        user = User.objects.create_user(
            username=f"bench-{role}-{secrets.token_hex(3)}", password=secrets.token_hex(8)
        )
        person_enroll(user=user, roles=frozenset({role}), namespace_id=namespace_id)
        return user

    world = seed_world(label="bench")
    task_ids = needs_review_tasks(world, args.tasks, key_prefix="incident")
    operator = person("operator", world["namespace_id"])
    supervisor = person("supervisor", world["namespace_id"])
    other = seed_world(label="bench-other")
    bystander = person("supervisor", other["namespace_id"])
    credential = OrbitCredential.objects.get(user=operator)

    async def read_all() -> list[batches.Seen]:
        gate = asyncio.Semaphore(8)
        async with orbit_client(credential) as orbit:

            async def read(task_id: str) -> batches.Seen:
                async with gate:
                    return batches.Seen(task_id, await orbit.get_task(task_id))

            return list(await asyncio.gather(*(read(t) for t in task_ids)))

    batch = batches.batch_create(
        action="review",
        created_by=operator,
        namespace_id=world["namespace_id"],
        selection={"scope": "bench"},
        seen=async_to_sync(read_all)(),
    )
    decision = {
        "reason": "bench: broker outage, the writes are confirmed",
        "evidence_ref": "bench:INC-29",
        "outcome": "SUCCEEDED",
        "result": '{"settled":"{{business_key}}","handler":"{{handler}}"}',
        "template": True,
    }
    batches.batch_decide(batch, person=operator, decision=decision)
    batches.batch_submit(batch, person=operator, typed_count=len(task_ids))

    # The unrelated write: a decision in the other namespace, every 20 ms.
    waits: list[tuple[float, float]] = []  # (start, seconds)
    failures: list[str] = []  # writes the database gave up on (a lock wait timeout)
    stop = threading.Event()

    def write() -> None:
        revision = 0
        while not stop.is_set():
            revision += 1
            began = time.perf_counter()
            try:
                submission_create(
                    action="review",
                    task_id=other["tasks"]["needs_review"],
                    namespace_id=other["namespace_id"],
                    expected_revision=str(revision),
                    body="{}",
                    created_by=bystander,
                )
            except Exception as error:  # counted, and the writer goes on
                failures.append(f"{type(error).__name__}: {error}")
                connection.close()
            waits.append((began, time.perf_counter() - began))
            time.sleep(0.02)
        connection.close()

    writer = threading.Thread(target=write, daemon=True)
    load_before = loadavg()
    writer.start()
    time.sleep(1.0)  # the writer's own pace, before the approval

    transactions: list[float] = []
    began = time.perf_counter()
    started = time.perf_counter()
    batches.batch_approve(batch_id=batch.id, approver=supervisor)
    transactions.append(time.perf_counter() - started)
    store_next = getattr(batches, "batch_store_next", None)
    while store_next is not None:
        started = time.perf_counter()
        more = store_next(batch_id=batch.id)
        transactions.append(time.perf_counter() - started)
        if not more:
            break
    approval = time.perf_counter() - began
    ended = time.perf_counter()
    time.sleep(1.0)
    stop.set()
    writer.join(timeout=30)
    load_after = loadavg()

    batch = Batch.objects.get(id=batch.id)
    stored = Submission.objects.filter(batch_item__batch=batch).count()
    during = [seconds for at, seconds in waits if at + seconds >= began and at <= ended]
    quiet = [seconds for at, seconds in waits if at + seconds < began]
    result: dict[str, Any] = {
        "machine": machine(),
        "loadavg_before": load_before,
        "loadavg_after": load_after,
        "database": "sqlite" if database_url.startswith("sqlite") else "mysql",
        "code": "chunked" if store_next is not None else "one transaction",
        "chunk": getattr(settings, "CONSOLE_BATCH_START_CHUNK", None),
        "tasks": len(task_ids),
        "state": batch.state,
        "submissions_stored": stored,
        "approval_seconds": round(approval, 2),
        "transactions": len(transactions),
        "longest_transaction_seconds": round(max(transactions), 3),
        "other_write_quiet_max_ms": round(1000 * max(quiet, default=0.0), 1),
        "other_writes_during": len(during),
        "other_write_longest_wait_ms": round(1000 * max(during, default=0.0), 1),
        "other_write_failures": failures,
    }
    assert batch.state == BatchState.RUNNING and stored == len(task_ids), result
    name = f"batch_start{'-' + args.label if args.label else ''}.json"
    (BENCH_DIR / name).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
