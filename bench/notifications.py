"""How many notifications one delivery worker sends a second, and how long the first one
takes from the act to a receiver (issue 32; target: p95 ≤ 2 s on this machine).

    uv run python bench/notifications.py [--backlog 500] [--acts 60] [--label NAME]

What it does:

1. A fresh SQLite database under ``var/bench/``, migrated; a supervisor and an operator of one
   namespace; a webhook endpoint of that namespace (plain JSON) pointing at a receiver on
   127.0.0.1 in this process that verifies every signature with the ``standardwebhooks``
   library and keeps each ``webhook-id`` once (``tests/support/receivers.py``).
2. Throughput: ``--backlog`` proposals are made while no worker runs (each writes one
   notification, its recipient and one webhook message in the act's transaction); then
   ``manage.py notify deliver`` starts in a process of its own and the clock runs until the
   receiver holds every message. Email is off (the people have no address).
3. Latency: with that worker running (it polls every second: the act happens in another
   process, which cannot wake it), ``--acts`` proposals are made 200 ms apart; for each, from
   the act's commit to the receiver verifying its message.

Reported: messages a second, act→receiver p50/p95/max, duplicates and bad signatures (both
must be 0), and the load average before and after. Results on stdout and in
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
    server_env,
    setup_django,
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--backlog", type=int, default=500)
    parser.add_argument("--acts", type=int, default=60)
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    os.environ["CONSOLE_WEBHOOK_ALLOWED_NETWORKS"] = "127.0.0.0/8"
    os.environ["LOG_LEVEL"] = "WARNING"
    database_url = fresh_database(None, "notifications.sqlite3")
    manage(database_url, "migrate", "--noinput")
    setup_django(database_url)

    from django.contrib.auth.models import Group, User

    from orbit_console.decisions.proposals import proposal_create
    from orbit_console.lib.ids import new_id
    from orbit_console.lib.secretbox import seal
    from orbit_console.notifications import webhooks
    from orbit_console.people.models import OrbitCredential
    from tests.support.receivers import Receiver

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
    _, secret = webhooks.endpoint_add(namespace_id=namespace, url=receiver.url, event_types=[])
    receiver.secrets.append(secret)

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
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "notify", "deliver"],
        cwd=ROOT,
        env=server_env(database_url, CONSOLE_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8"),
    )
    try:
        started = time.monotonic()
        while len(receiver.verified) < args.backlog and time.monotonic() - started < 600:
            time.sleep(0.05)
        drained = time.monotonic() - started
        delivered = len(receiver.verified)

        acted_at: dict[str, float] = {}
        for _ in range(args.acts):
            acted_at[act()] = time.time()
            time.sleep(0.2)
        deadline = time.monotonic() + 60
        while len(receiver.verified) < args.backlog + args.acts and time.monotonic() < deadline:
            time.sleep(0.05)
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        receiver.stop()

    latencies = []
    for message_id, payload in receiver.verified.items():
        task_id = payload["data"].get("task_id")
        if task_id in acted_at:
            latencies.append(receiver.received_at[message_id] - acted_at[task_id])
    results: dict[str, Any] = {
        "machine": machine(),
        "backlog": args.backlog,
        "delivered": delivered,
        "drain_seconds": round(drained, 2),
        "per_second": round(delivered / drained, 1) if drained else None,
        "acts": args.acts,
        "latency_received": len(latencies),
        "latency_p50_s": round(percentile(latencies, 0.5), 3) if latencies else None,
        "latency_p95_s": round(percentile(latencies, 0.95), 3) if latencies else None,
        "latency_max_s": round(max(latencies), 3) if latencies else None,
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
