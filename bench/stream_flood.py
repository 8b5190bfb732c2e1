"""Console pages while one token opens many event streams (issue 29: 300 idle streams from one
token took the work queue from 81 ms p50 to 2.4 s).

    uv run python bench/stream_flood.py [--streams 300] [--pages 60] [--label L]
        [--database-url mysql://root@127.0.0.1:3306/orbit_bench]

One worker of the production shape (the embedded API in the same process, as production runs
it) on a fresh database. A signed-in operator asks for the work queue page, one request after
another, in three phases: with no stream open; while one credential opens ``--streams`` streams
of one subscription, twenty handshakes at a time; and once those are open (each pinging as a
client must). Reported: each phase's page times (p50, p95, max, ms), how many streams were
admitted and refused, and the load average before and after. Results: stdout and
``var/bench/stream_flood[-<label>].json``; written up in docs/performance.md, never asserted.
Run it from the tree to measure (a checkout of the commit before the limits measures them
absent).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import sys
import threading
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
    setup_django,
    signin_form,
    summary,
)
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import InvalidStatus
from websockets.typing import Origin, Subprotocol

AT_ONCE = 20  # handshakes in flight at a time
PING_SECONDS = 5.0  # half the default heartbeat, as orbit_console/client/events.py pings


def build_world(database_url: str) -> dict[str, Any]:
    manage(database_url, "migrate", "--verbosity", "0")
    seeded = json.loads(manage(database_url, "orbit", "seed"))
    setup_django(database_url)
    from django.contrib.auth.models import User
    from django.db import connections

    from orbit_console.people.credentials import person_enroll

    password = secrets.token_urlsafe(12)
    user = User.objects.create_user(username="bench-flood", password=password)
    person_enroll(user=user, roles=frozenset({"operator"}), namespace_id=seeded["namespace_id"])
    connections.close_all()
    return {**seeded, "username": "bench-flood", "password": password}


class Pages(threading.Thread):
    """The operator's page loop, timing each work-queue page, labelled by the phase."""

    def __init__(self, base: str, username: str, password: str) -> None:
        super().__init__(daemon=True)
        self.http = httpx.Client(base_url=base, timeout=120, follow_redirects=False)
        page = self.http.get("/signin")
        answer = self.http.post("/signin", data=signin_form(page.text, username, password))
        if answer.status_code != 302:
            raise SystemExit(f"could not sign in: {answer.status_code}")
        self.phase = "none"
        self.timings: dict[str, list[float]] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            phase = self.phase
            began = time.perf_counter()
            response = self.http.get("/")
            if response.status_code != 200:
                raise SystemExit(f"the work queue answered {response.status_code}")
            self.timings.setdefault(phase, []).append((time.perf_counter() - began) * 1000)

    def count(self, phase: str) -> int:
        return len(self.timings.get(phase, []))


async def open_streams(
    base: str, token: str, subscription_id: str, count: int
) -> tuple[list[ClientConnection], dict[str, int]]:
    url = base.replace("http", "ws", 1) + f"/v1/subscriptions/{subscription_id}/events"
    opened: list[ClientConnection] = []
    refused: dict[str, int] = {}
    gate = asyncio.Semaphore(AT_ONCE)

    async def one() -> None:
        async with gate:
            try:
                socket = await connect(
                    url,
                    subprotocols=[Subprotocol("orbit.events.v1")],
                    additional_headers={"Authorization": f"Bearer {token}"},
                    origin=Origin(base),
                    open_timeout=120,
                )
            except InvalidStatus as refusal:
                status = str(refusal.response.status_code)
                refused[status] = refused.get(status, 0) + 1
                return
            await socket.recv()  # welcome
            opened.append(socket)

    await asyncio.gather(*(one() for _ in range(count)))
    return opened, refused


async def keep_alive(sockets: list[ClientConnection], stop: asyncio.Event) -> None:
    while not stop.is_set():
        for socket in sockets:
            await socket.send('{"type":"ping"}')
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), PING_SECONDS)


async def flood(
    pages: Pages, base: str, world: dict[str, Any], streams: int, wanted: int
) -> dict[str, Any]:
    token = world["tokens"]["subscriber"]
    created = httpx.post(
        f"{base}/v1/subscriptions",
        json={"name": "flood"},
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": "flood"},
        timeout=60,
    )
    subscription_id = created.json()["data"]["id"]
    while pages.count("none") < wanted:
        await asyncio.sleep(0.1)
    pages.phase = "opening"
    began = time.perf_counter()
    opened, refused = await open_streams(base, token, subscription_id, streams)
    opening_s = time.perf_counter() - began
    stop = asyncio.Event()
    pinging = asyncio.create_task(keep_alive(opened, stop))
    pages.phase = "open"
    while pages.count("open") < wanted:
        await asyncio.sleep(0.1)
    pages.stop.set()
    stop.set()
    await pinging
    for socket in opened:
        await socket.close()
    return {"admitted": len(opened), "refused": refused, "opening_s": round(opening_s, 1)}


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--streams", type=int, default=300)
    parser.add_argument("--pages", type=int, default=60, help="pages per quiet phase")
    parser.add_argument("--label", default="")
    args = parser.parse_args(argv)

    database_url = fresh_database(args.database_url, "stream_flood.sqlite3")
    world = build_world(database_url)
    name = f"stream_flood{'-' + args.label if args.label else ''}"
    server = ServedProcess(
        database_url,
        shape="worker",
        log_path=BENCH_DIR / f"{name}.log",
        extra_env={"LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING")},
    ).start()
    results: dict[str, Any] = {"machine": machine(), "streams": args.streams}
    results["load_before"] = loadavg()
    try:
        pages = Pages(server.url, world["username"], world["password"])
        pages.start()
        results.update(asyncio.run(flood(pages, server.url, world, args.streams, args.pages)))
        pages.join()
    finally:
        server.stop()
    results["load_after"] = loadavg()
    results["pages_ms"] = {phase: summary(times) for phase, times in pages.timings.items()}
    (BENCH_DIR / f"{name}.json").write_text(json.dumps(results, indent=2))
    print(json.dumps({key: value for key, value in results.items() if key != "machine"}, indent=2))


if __name__ == "__main__":
    sys.exit(main())
