"""The live timeline at scale: many viewers over many tasks, on a replica's whole serving shape.

    uv run python bench/timeline_scale.py --database-url mysql://root@127.0.0.1:3306/orbit_bench
        --redis-url redis://127.0.0.1:6379/14 [--viewers 1000] [--tasks 100] [--people 50]
        [--quiet 60] [--label L]

The world (``timeline_latency.build_world``): ``--people`` auditors and ``--tasks`` tasks in
NEEDS_REVIEW. The server is the Dockerfile's ``CMD`` (``manage.py serve``: with Redis, one
daphne worker per core, two here), so the sockets land on two console processes and every
push crosses Redis.

Viewer i is person ``i % people`` watching task ``i % tasks`` over a real WebSocket (session
cookie, Origin), the viewers connecting evenly over one re-check period. Then:

1. **Quiet**: ``--quiet`` seconds with every socket open and nothing happening. The server's
   CPU in that window, less its CPU in as long a window with no socket open, is what keeping
   the viewers authorised costs (the periodic checks against the API: one per person and task
   watched, shared by their sockets, timeline/verdicts.py).
2. **Events**: every task is reviewed once, one after another, through the recovery API over
   HTTP (``--pause`` apart). Each review's audit record reaches the viewers of that task;
   latency = the arrival at the client minus the record's ``created_at`` (taken inside the
   review's transaction a few writes before the commit, so it slightly overstates the time
   from the commit). An entry that never arrives within 15 s is lost.

Results: stdout and ``var/bench/timeline_scale[-<label>].json``; written up in
docs/performance.md, never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import secrets
import shlex
import sys
import time
from collections.abc import Sequence
from typing import Any

import httpx
from support import (
    BENCH_DIR,
    ServedProcess,
    fresh_database,
    loadavg,
    machine,
    manage,
    summary,
    tree_cpu_seconds,
)
from timeline_latency import (
    ARRIVAL_TIMEOUT,
    Viewer,
    build_world,
    review_body,
    sign_in,
    utc_seconds,
)
from websockets.asyncio.client import connect

RECHECK_SECONDS = 5.0


async def open_all(
    base: str, sessions: list[str], tasks: list[str], viewers: int
) -> list[tuple[str, Viewer]]:
    """Viewer i: person i % len(sessions) on task i % len(tasks), spread over a period."""

    async def one(index: int) -> tuple[str, Viewer]:
        await asyncio.sleep(index * RECHECK_SECONDS / viewers)
        task_id = tasks[index % len(tasks)]
        ws = await connect(
            base.replace("http://", "ws://") + f"/ws/tasks/{task_id}/timeline",
            origin=base,  # type: ignore[arg-type]
            additional_headers={"Cookie": f"sessionid={sessions[index % len(sessions)]}"},
            open_timeout=120,
            ping_interval=None,
        )
        return task_id, Viewer(f"ws-{index}", ws)

    return list(await asyncio.gather(*(one(index) for index in range(viewers))))


async def quiet_cpu(server: ServedProcess, seconds: float) -> float:
    before = tree_cpu_seconds(server.pid)
    await asyncio.sleep(seconds)
    return tree_cpu_seconds(server.pid) - before


async def measure(server: ServedProcess, world: Any, args: argparse.Namespace) -> dict[str, Any]:
    base = server.url
    tasks = world.tasks
    sessions = [await sign_in(base, name, password) for name, password in world.people]
    idle_cpu = await quiet_cpu(server, args.quiet)
    began = time.monotonic()
    viewers = await open_all(base, sessions, tasks, args.viewers)
    connect_s = time.monotonic() - began
    busy_cpu = await quiet_cpu(server, args.quiet)
    by_task: dict[str, list[Viewer]] = {}
    for task_id, viewer in viewers:
        by_task.setdefault(task_id, []).append(viewer)

    latencies: list[float | None] = []
    review_ms: list[float] = []
    headers = {"Authorization": f"Bearer {world.admin_token}", "Content-Type": "application/json"}
    cpu_before = tree_cpu_seconds(server.pid)
    events_began = time.monotonic()
    async with httpx.AsyncClient(base_url=base, timeout=30, headers=headers) as api:
        for task_id in tasks:
            sent = time.perf_counter()
            answer = await api.post(
                f"/v1/tasks/{task_id}:review",
                content=review_body(),
                headers={"Idempotency-Key": secrets.token_hex(8)},
            )
            review_ms.append((time.perf_counter() - sent) * 1000)
            answer.raise_for_status()
            audit_id = answer.json()["data"]["audit_id"]
            detail = await api.get(f"/v1/tasks/{task_id}/operations/{audit_id}")
            created = utc_seconds(detail.json()["data"]["created_at"])
            arrivals = await asyncio.gather(
                *(viewer.arrival(audit_id, ARRIVAL_TIMEOUT) for viewer in by_task[task_id])
            )
            latencies.extend(None if at is None else (at - created) * 1000 for at in arrivals)
            await asyncio.sleep(args.pause)
    events_cpu = tree_cpu_seconds(server.pid) - cpu_before
    events_wall = time.monotonic() - events_began
    for _, viewer in viewers:
        await viewer.close()
    keys = len({(i % len(sessions), i % len(tasks)) for i in range(args.viewers)})
    return {
        "viewers": args.viewers,
        "tasks": len(tasks),
        "people": len(sessions),
        "person_task_pairs": keys,
        "connect_s": round(connect_s, 1),
        "quiet_s": args.quiet,
        "idle_cpu_s": round(idle_cpu, 2),
        "with_viewers_cpu_s": round(busy_cpu, 2),
        "authorisation_cpu_s_per_min": round((busy_cpu - idle_cpu) * 60 / args.quiet, 2),
        "authorisation_checks_per_min": round(keys * 60 / RECHECK_SECONDS),
        "created_to_arrival_ms": summary(latencies),
        "review_http_ms": summary(review_ms),
        "events_server_cpu_pct": round(100 * events_cpu / events_wall, 1),
    }


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--redis-url", required=True, help="the workers share Redis")
    parser.add_argument("--viewers", type=int, default=1000)
    parser.add_argument("--tasks", type=int, default=100)
    parser.add_argument("--people", type=int, default=50)
    parser.add_argument("--quiet", type=float, default=60)
    parser.add_argument("--pause", type=float, default=0.2)
    parser.add_argument("--label", default="")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, max(soft, 4 * args.viewers)), hard))
    database_url = fresh_database(args.database_url, "timeline_scale.sqlite3")
    manage(database_url, "migrate", "--verbosity", "0")
    world = build_world(database_url, people=args.people, tasks=args.tasks)
    name = f"timeline_scale{'-' + args.label if args.label else ''}"
    server = ServedProcess(
        database_url,
        shape="dockerfile",
        log_path=BENCH_DIR / f"{name}.log",
        extra_env={"REDIS_URL": args.redis_url, "LOG_LEVEL": "WARNING"},
    ).start()
    results: dict[str, Any] = {
        "machine": machine(),
        "server": shlex.join(server.command),
        "load_before": loadavg(),
    }
    try:
        results.update(asyncio.run(measure(server, world, args)))
    finally:
        server.stop()
    results["load_after"] = loadavg()
    (BENCH_DIR / f"{name}.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    sys.exit(main())
