"""A 1 000-task batch against the embedded API: how long, and the worker's memory (issue 16).

    uv run python bench/bulk_recovery.py [--tasks 1000]
        [--database-url mysql://root@127.0.0.1:3306/orbit_bench] [--redis-url redis://...]

What it does:

1. A fresh database (an SQLite file under ``var/bench/``, or the MySQL/MariaDB database named
   in ``--database-url``, dropped and created again; its name must contain "bench"), migrated.
2. In this process (Django set up on the same database): ``orbit seed``'s world, N tasks in
   NEEDS_REVIEW, and a supervisor with a credential minted as ``console user`` mints it.
3. The three steps as the pages take them: every task read through the API as the supervisor
   (the verify step's frozen selection), the decision, the confirm step (approvals are off
   here: the batch starts at once). Timed: "select" (reads + items stored) and "start" (one
   durable submission per task stored, before anything is sent).
4. ``manage.py reconcile`` in its own process, the worker as deployed, sends the batch: the
   time from its start to the batch's ``finished_at``, items per second, and the worker's
   ``VmRSS`` sampled every 100 ms (at the start, at 10 %, 50 % and 100 % of the items, and the
   peak): "flat" means the memory does not grow with the items sent.
5. Checks: every item applied, one ``task.review`` audit record per task.

Results: a table on stdout and ``var/bench/bulk_recovery[-<label>].json``; written up in
docs/performance.md ("Batches"). Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from support import (
    BENCH_DIR,
    ROOT,
    fresh_database,
    loadavg,
    machine,
    manage,
    server_env,
    setup_django,
)


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--database-url", default="")
    parser.add_argument("--redis-url", default="")
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    # The batch starts on confirming (no approval): what is measured is the sending.
    os.environ["CONSOLE_REVIEW_APPROVAL"] = "off"
    database_url = fresh_database(args.database_url or None, "bulk_recovery.sqlite3")
    manage(database_url, "migrate", "--noinput")
    setup_django(database_url)

    from asgiref.sync import async_to_sync
    from django.contrib.auth.models import User
    from support import needs_review_tasks

    from orbit_console.decisions import batches
    from orbit_console.decisions.models import Batch, BatchItem, ItemOutcome
    from orbit_console.ledger.models import OperationAudit
    from orbit_console.ledger.seed import seed_world
    from orbit_console.people.credentials import person_enroll
    from orbit_console.people.models import OrbitCredential
    from orbit_console.people.person import orbit_client

    world = seed_world(label="bench")
    task_ids = needs_review_tasks(world, args.tasks, key_prefix="incident")
    user = User.objects.create_user(username="bench-supervisor", password=secrets.token_hex(8))
    person_enroll(user=user, roles=frozenset({"supervisor"}), namespace_id=world["namespace_id"])
    credential = OrbitCredential.objects.get(user=user)

    async def read_all() -> list[batches.Seen]:
        import asyncio

        gate = asyncio.Semaphore(8)
        async with orbit_client(credential) as orbit:

            async def read(task_id: str) -> batches.Seen:
                async with gate:
                    return batches.Seen(task_id, await orbit.get_task(task_id))

            return list(await asyncio.gather(*(read(t) for t in task_ids)))

    started = time.perf_counter()
    seen = async_to_sync(read_all)()
    batch = batches.batch_create(
        action="review",
        created_by=user,
        namespace_id=world["namespace_id"],
        selection={"scope": "bench"},
        seen=seen,
    )
    selected = time.perf_counter() - started
    decision = {
        "reason": "bench: broker outage, the writes are confirmed",
        "evidence_ref": "bench:INC-1",
        "outcome": "SUCCEEDED",
        "result": '{"settled":"{{business_key}}"}',
        "template": True,
    }
    batches.batch_decide(batch, person=user, decision=decision)
    started = time.perf_counter()
    batches.batch_submit(batch, person=user, typed_count=len(task_ids))
    batches.batch_store(batch_id=batch.id)  # as the confirm page does, a chunk at a time
    start_seconds = time.perf_counter() - started

    extra = {"REDIS_URL": args.redis_url} if args.redis_url else {}
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "reconcile", "--interval", "0.5"],
        cwd=ROOT,
        env=server_env(database_url, **extra),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    samples: list[tuple[float, int]] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            try:
                samples.append((time.perf_counter(), rss_kib(worker.pid)))
            except FileNotFoundError:
                return
            time.sleep(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    began = time.perf_counter()
    sampler.start()
    marks: dict[str, int] = {}
    try:
        while True:
            done = BatchItem.objects.filter(batch=batch).exclude(outcome="").count()
            share = done / len(task_ids)
            for name, at in (("10%", 0.1), ("50%", 0.5)):
                if share >= at and name not in marks and samples:
                    marks[name] = samples[-1][1]
            if Batch.objects.filter(id=batch.id, finished_at__isnull=False).exists():
                break
            if time.perf_counter() - began > 300:
                raise SystemExit("the batch did not finish in 5 minutes")
            time.sleep(0.2)
        finished = Batch.objects.get(id=batch.id).finished_at
        sending = time.perf_counter() - began
        marks["100%"] = samples[-1][1] if samples else 0
    finally:
        stop.set()
        worker.terminate()
        worker.wait(timeout=30)
    counts = batches.outcome_counts(batch)
    audits = OperationAudit.objects.filter(task_id__in=task_ids, action="task.review").count()
    result: dict[str, Any] = {
        "machine": machine(),
        "loadavg": loadavg(),
        "database": "sqlite" if database_url.startswith("sqlite") else "mysql",
        "tasks": len(task_ids),
        "select_seconds": round(selected, 2),
        "start_seconds": round(start_seconds, 2),
        "send_seconds": round(sending, 2),
        "total_seconds": round(selected + start_seconds + sending, 2),
        "items_per_second": round(len(task_ids) / sending, 1),
        "finished_at": str(finished),
        "worker_rss_kib": {
            "start": samples[0][1] if samples else 0,
            **marks,
            "peak": max((s[1] for s in samples), default=0),
        },
        "outcomes": counts,
        "review_audits": audits,
        "all_applied": counts.get(ItemOutcome.APPLIED, 0) == len(task_ids)
        and audits == len(task_ids),
    }
    name = f"bulk_recovery{'-' + args.label if args.label else ''}.json"
    (BENCH_DIR / name).write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
