"""How many notifications one delivery worker sends a second, how long one takes from the act
to a receiver, and what the worker's CPU pays for each (issues 32, 41, 44).

    uv run python bench/notifications.py [--backlog 500] [--acts 60] [--redis URL] [--slow]
                                         [--label NAME]

What it does:

1. A fresh SQLite database under ``var/bench/``, migrated; a supervisor and an operator of one
   namespace; a webhook endpoint of that namespace (plain JSON) pointing at a receiver on
   127.0.0.1 in this process that verifies every signature with the ``standardwebhooks``
   library and keeps each ``webhook-id`` once (``tests/support/receivers.py``). With
   ``--slow``, two more endpoints of the namespace: one that drips its answer a byte a second,
   one that never answers; the healthy receiver's numbers must not move (issue 41).
2. Throughput: ``--backlog`` proposals are made while no worker runs (each writes one
   notification, its recipient and a webhook message per endpoint in the act's transaction);
   then ``manage.py notify deliver`` starts in a process of its own and the clock runs until the
   healthy receiver holds every message. Email is off (the people have no address).
3. Idle: ten seconds with nothing to send: the worker's CPU while it waits.
4. Latency: ``--acts`` proposals are made 200 ms apart; for each, from the act's commit to the
   healthy receiver verifying its message. The acts happen in this process, not the
   worker's: without ``--redis`` the worker finds them when it polls (every second); with it
   the commit wakes the worker through the channel layer they share (issue 44).

Reported: messages a second and worker CPU ms per message (the backlog), worker CPU % idle,
act→receiver p50/p95/max and worker CPU ms per message (the acts), duplicates and bad
signatures (both must be 0), and the load average before and after. Results on stdout and in
``var/bench/notifications[-<label>].json``; written up in docs/performance.md
("Notifications"). Never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from support import (
    BENCH_DIR,
    ROOT,
    fresh_database,
    loadavg,
    machine,
    manage,
    percentile,
    process_cpu_seconds,
    server_env,
    setup_django,
)

IDLE_SECONDS = 10.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backlog", type=int, default=500)
    parser.add_argument("--acts", type=int, default=60)
    parser.add_argument("--redis", default="", help="a Redis URL the worker and acts share")
    parser.add_argument("--slow", action="store_true", help="a dripping and a hanging endpoint")
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    os.environ["CONSOLE_WEBHOOK_ALLOWED_NETWORKS"] = "127.0.0.0/8"
    os.environ["LOG_LEVEL"] = "WARNING"
    # This run's channel-layer groups are its own on a shared Redis.
    os.environ["REDIS_CHANNEL_PREFIX"] = f"bench-notifications-{os.getpid()}"
    database_url = fresh_database(None, "notifications.sqlite3")
    manage(database_url, "migrate", "--noinput")
    setup_django(database_url, redis_url=args.redis)

    from django.contrib.auth.models import Group, User

    from orbit_console.decisions.proposals import proposal_create
    from orbit_console.lib.ids import new_id
    from orbit_console.lib.secretbox import seal
    from orbit_console.notifications import webhooks
    from orbit_console.people.models import OrbitCredential
    from tests.support.receivers import Receiver, Reply

    namespace = f"bench-{new_id()[:8]}"
    people = {}
    for role in ("supervisor", "operator"):
        user = User.objects.create_user(username=f"{role}-{new_id()[:6]}")
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        OrbitCredential.objects.create(
            user=user, token_ciphertext=seal("x"), namespace_id=namespace
        )
        people[role] = user
    receiver = Receiver(secrets=[]).start()
    slow = (
        [
            Receiver(secrets=[], script=lambda n: Reply(200, drip=1.0, drip_bytes=600)).start(),
            Receiver(secrets=[], script=lambda n: Reply(hang=True)).start(),
        ]
        if args.slow
        else []
    )
    for each in (receiver, *slow):
        _, secret = webhooks.endpoint_add(namespace_id=namespace, url=each.url, event_types=[])
        each.secrets.append(secret)

    def act() -> str:
        task_id = f"task-{new_id()}"
        proposal_create(
            action="review",
            task_id=task_id,
            expected_revision="3",
            body='{"outcome": "SUCCEEDED", "reason": "bench"}',
            proposed_by=people["operator"],
            namespace_id=namespace,
        )
        return task_id

    load_before = loadavg()
    for _ in range(args.backlog):
        act()
    worker_env = {"CONSOLE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8"}
    if args.redis:
        worker_env["REDIS_URL"] = args.redis
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "notify", "deliver"],
        cwd=ROOT,
        env=server_env(database_url, **worker_env),
    )
    try:
        started = time.monotonic()
        while len(receiver.verified) < args.backlog and time.monotonic() - started < 600:
            time.sleep(0.05)
        drained = time.monotonic() - started
        delivered = len(receiver.verified)
        cpu_drained = process_cpu_seconds(worker.pid)  # its start-up included

        time.sleep(IDLE_SECONDS)
        cpu_idle = process_cpu_seconds(worker.pid) - cpu_drained

        cpu_before_acts = process_cpu_seconds(worker.pid)
        acted_at: dict[str, float] = {}
        for _ in range(args.acts):
            acted_at[act()] = time.time()
            time.sleep(0.2)
        deadline = time.monotonic() + 60
        while len(receiver.verified) < args.backlog + args.acts and time.monotonic() < deadline:
            time.sleep(0.05)
        cpu_acts = process_cpu_seconds(worker.pid) - cpu_before_acts
    finally:
        worker.terminate()
        worker.wait(timeout=60)
        for each in (receiver, *slow):
            each.stop()

    latencies = []
    for message_id, payload in receiver.verified.items():
        task_id = payload["data"].get("task_id")
        if task_id in acted_at:
            latencies.append(receiver.received_at[message_id] - acted_at[task_id])
    results: dict[str, Any] = {
        "machine": machine(),
        "redis": bool(args.redis),
        "slow_endpoints": len(slow),
        "backlog": args.backlog,
        "delivered": delivered,
        "drain_seconds": round(drained, 2),
        "per_second": round(delivered / drained, 1) if drained else None,
        "worker_cpu_ms_per_message_backlog": round(1000 * cpu_drained / delivered, 2)
        if delivered
        else None,
        "worker_cpu_pct_idle": round(100 * cpu_idle / IDLE_SECONDS, 2),
        "acts": args.acts,
        "latency_received": len(latencies),
        "latency_p50_s": round(percentile(latencies, 0.5), 3) if latencies else None,
        "latency_p95_s": round(percentile(latencies, 0.95), 3) if latencies else None,
        "latency_max_s": round(max(latencies), 3) if latencies else None,
        "worker_cpu_ms_per_message_acts": round(1000 * cpu_acts / len(latencies), 2)
        if latencies
        else None,
        "duplicates": len(receiver.duplicates),
        "bad_signatures": receiver.bad_signatures,
        "loadavg_before": load_before,
        "loadavg_after": loadavg(),
    }
    print(json.dumps(results, indent=2))
    name = f"notifications-{args.label}.json" if args.label else "notifications.json"
    (BENCH_DIR / name).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
