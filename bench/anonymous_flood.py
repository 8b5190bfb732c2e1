"""A signed-in person's pages while the anonymous edge is flooded (issue 40, items 5 and 6).

    uv run python bench/anonymous_flood.py [--database-url mysql://root@127.0.0.1:3306/orbit_bench]
        [--pages 60] [--connections 48] [--addresses 8] [--label L]

One console worker as the Dockerfile's ``CMD`` runs it (default bounds; the client's address
from ``X-Forwarded-For``), configured for the suite's OpenID Connect provider (Node.js, ``npm ci
--prefix tests/support/oidc``), on a fresh database with a supervisor. Two phases:

1. **quiet**: the supervisor opens ``/approvals`` ``--pages`` times, one after the other;
2. **flood**: the same, while ``--connections`` connections from ``--addresses`` addresses
   send the anonymous paths' requests back to back — the sign-in page, company sign-in's start
   and its callback, back-channel logout with tokens signed with invented key ids (issue 40's
   report: 48 connections on ``GET /signin``; 16 posting such tokens).

Reported per phase: the supervisor's page times (p50, p95, max) and how many were shed (must be
0 in the flood); the flood's answers by path and status, a second; the server's CPU per request
served (milliseconds) and per second, this load generator's, the load average; the provider's
key fetches (``orbit_oidc_key_fetches_total``). Results: stdout and
``var/bench/anonymous_flood[-<label>].json``, written up in docs/performance.md. Timings mean
something only on a quiet machine (1-minute load under 1.5); CPU per request is steadier.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import json
import re
import secrets
import sys
import time
from typing import Any

import httpx
from fuzz_signin import invented_key_logout_token
from support import (
    BENCH_DIR,
    ROOT,
    CpuMeter,
    ServedProcess,
    fresh_database,
    loadavg,
    machine,
    manage,
    setup_django,
    signin_form,
    summary,
    tree_cpu_seconds,
)

CLIENT_ID = "orbit-console"
METRICS_TOKEN = secrets.token_urlsafe(16)


KINDS = ("signin", "password", "oidc start", "oidc callback", "back-channel logout")


async def flood(
    url: str,
    issuer: str,
    connections: int,
    addresses: int,
    kinds: list[str],
    done: asyncio.Event,
) -> collections.Counter[str]:
    seen: collections.Counter[str] = collections.Counter()

    async def connection(client: httpx.AsyncClient, number: int) -> None:
        headers = {"X-Forwarded-For": f"198.18.1.{number % addresses + 1}"}
        turn = number
        while not done.is_set():
            kind = kinds[turn % len(kinds)]
            turn += 1
            try:
                if kind == "signin":
                    answer = await client.get("/signin", headers=headers)
                elif kind == "password":
                    # A wrong password for a user name of its own: hashed, never paused.
                    page = await client.get("/signin", headers=headers)
                    if page.status_code != 200:
                        seen[f"{kind} {page.status_code}"] += 1
                        continue
                    form = signin_form(page.text, secrets.token_hex(6), "wrong")
                    answer = await client.post("/signin", data=form, headers=headers)
                elif kind == "oidc start":
                    answer = await client.get("/signin/oidc", headers=headers)
                elif kind == "oidc callback":
                    query = {"code": secrets.token_hex(8), "state": secrets.token_hex(8)}
                    answer = await client.get(
                        "/signin/oidc/callback", params=query, headers=headers
                    )
                else:
                    answer = await client.post(
                        "/signin/oidc/backchannel-logout",
                        data={"logout_token": invented_key_logout_token(issuer, CLIENT_ID)},
                        headers=headers,
                    )
            except httpx.HTTPError as failed:
                seen[f"{kind} {type(failed).__name__}"] += 1
                continue
            seen[f"{kind} {answer.status_code}"] += 1

    # A client each: its own connection and cookies (the sign-in form's CSRF token).
    clients = [httpx.AsyncClient(base_url=url, timeout=60) for _ in range(connections)]
    try:
        await asyncio.gather(*(connection(client, n) for n, client in enumerate(clients)))
    finally:
        for client in clients:
            await client.aclose()
    return seen


async def pages(url: str, cookies: dict[str, str], count: int) -> tuple[list[float], int]:
    took, shed = [], 0
    async with httpx.AsyncClient(base_url=url, cookies=cookies, timeout=60) as supervisor:
        for _ in range(count):
            began = time.perf_counter()
            answer = await supervisor.get("/approvals")
            took.append(time.perf_counter() - began)
            if answer.status_code == 503:
                shed += 1
            else:
                assert answer.status_code == 200, answer.status_code
    return took, shed


def phase(
    server: ServedProcess,
    issuer: str,
    cookies: dict[str, str],
    args: argparse.Namespace,
    *,
    flooded: bool,
) -> dict[str, Any]:
    async def main() -> tuple[list[float], int, collections.Counter[str], float]:
        done = asyncio.Event()
        task = (
            asyncio.create_task(
                flood(server.url, issuer, args.connections, args.addresses, args.kinds, done)
            )
            if flooded
            else None
        )
        if task is not None:
            await asyncio.sleep(2)  # the flood under way: the lanes full
        began = time.monotonic()
        took, shed = await pages(server.url, cookies, args.pages)
        wall = time.monotonic() - began
        done.set()
        seen = await task if task is not None else collections.Counter()
        return took, shed, seen, wall

    meter = CpuMeter(server.pid)
    cpu_before = tree_cpu_seconds(server.pid)
    took, shed, seen, wall = asyncio.run(main())
    server_cpu = tree_cpu_seconds(server.pid) - cpu_before
    served = args.pages - shed + sum(v for k, v in seen.items() if not k.endswith(" 503"))
    return {
        "supervisor_pages_s": summary(took),
        "supervisor_pages_shed": shed,
        "flood_answers": dict(sorted(seen.items())),
        "flood_answers_a_second": round(sum(seen.values()) / wall, 1),
        "requests_served": served,
        "server_cpu_ms_per_request_served": round(1000 * server_cpu / max(served, 1), 2),
        **meter.percent(),
        "load": loadavg(),
    }


def key_fetches(url: str) -> dict[str, float]:
    text = httpx.get(
        f"{url}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30
    ).text
    return {
        outcome: float(value)
        for outcome, value in re.findall(
            r'^orbit_oidc_key_fetches_total\{outcome="(\w+)"\} (\S+)$', text, re.M
        )
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--pages", type=int, default=60)
    parser.add_argument("--connections", type=int, default=48)
    parser.add_argument("--addresses", type=int, default=8)
    parser.add_argument(
        "--kinds",
        nargs="+",
        choices=KINDS,
        default=["signin", "oidc start", "oidc callback", "back-channel logout"],
        help="what the flood sends (password: the sign-in form with a wrong password)",
    )
    parser.add_argument("--label", default="")
    args = parser.parse_args()

    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    database_url = fresh_database(args.database_url, "anonymous_flood.sqlite3")
    manage(database_url, "migrate", "--verbosity", "0")
    setup_django(database_url)
    from django.contrib.auth.models import User
    from django.db import connections

    from orbit_console.ledger.seed import seed_world
    from orbit_console.people.credentials import person_enroll

    sys.path.insert(0, str(ROOT))
    from tests.support.oidc import OidcProvider

    world = seed_world(label="bench")
    password = secrets.token_urlsafe(12)
    user = User.objects.create_user(username="bench-supervisor", password=password)
    person_enroll(user=user, roles=frozenset({"supervisor"}), namespace_id=world["namespace_id"])
    connections.close_all()

    idp = OidcProvider()
    secret = secrets.token_urlsafe(32)
    rules = [{"value": "orbit", "roles": ["auditor"], "namespaces": [world["namespace_id"]]}]
    server = ServedProcess(
        database_url,
        shape="dockerfile",
        log_path=BENCH_DIR / "anonymous_flood.log",
        extra_env={
            "LOG_LEVEL": "ERROR",  # a shed line per request would weigh on the measure
            "OIDC_ISSUER": idp.issuer,
            "OIDC_CLIENT_ID": CLIENT_ID,
            "OIDC_CLIENT_SECRET": secret,
            "OIDC_ROLE_RULES": json.dumps(rules),
            "METRICS_TOKEN": METRICS_TOKEN,
        },
    )
    idp.start(
        [
            {
                "client_id": CLIENT_ID,
                "client_secret": secret,
                "redirect_uris": [f"{server.url}/signin/oidc/callback"],
                "grant_types": ["authorization_code"],
            }
        ]
    )
    results: dict[str, Any] = {"machine": machine(), "load_before": loadavg(), "args": vars(args)}
    try:
        server.start()
        with httpx.Client(base_url=server.url, timeout=60) as browser:
            page = browser.get("/signin", headers={"X-Forwarded-For": "192.0.2.1"})
            signed_in = browser.post(
                "/signin",
                data=signin_form(page.text, user.username, password),
                headers={"X-Forwarded-For": "192.0.2.1"},
            )
            assert signed_in.status_code == 302, signed_in.status_code
            cookies = dict(browser.cookies)
            assert browser.get("/approvals").status_code == 200  # warm, and the pass given
            cookies = dict(browser.cookies)
        results["quiet"] = phase(server, idp.issuer, cookies, args, flooded=False)
        results["flood"] = phase(server, idp.issuer, cookies, args, flooded=True)
        results["key_fetches"] = key_fetches(server.url)
    finally:
        server.stop()
        idp.stop()
    name = f"anonymous_flood{'-' + args.label if args.label else ''}.json"
    (BENCH_DIR / name).write_text(json.dumps(results, indent=2, default=str))
    print(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
