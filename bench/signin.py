"""Signing in: how long a person waits for ``POST /signin``, right and wrong password.

    uv run python bench/signin.py [--database-url mysql://root@127.0.0.1:3306/orbit_bench]
        [--rounds 30]

One console server as the Dockerfile's ``CMD`` runs it (it takes the client's address from
X-Forwarded-For), on a fresh database with a person per round. Each round, one at a time:
``GET /signin`` (the form and its CSRF token), then ``POST /signin`` with the right password
(302), and with a wrong one (200, the form again); each person signs in once each way from an
address of their own, so that django-axes's pause never answers instead. The time of the
``POST`` alone is reported (loopback: the server's time), with the hashers' own time in this
process for scale. Results: stdout and ``var/bench/signin.json``; written up in
docs/performance.md, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import secrets
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
    setup_django,
    signin_form,
    summary,
)


def timed_post(base: str, username: str, password: str, address: str) -> tuple[int, float]:
    with httpx.Client(base_url=base, headers={"X-Forwarded-For": address}) as http:
        page = http.get("/signin")
        began = time.perf_counter()
        answer = http.post("/signin", data=signin_form(page.text, username, password))
        return answer.status_code, (time.perf_counter() - began) * 1000


def hasher_ms(rounds: int) -> dict[str, Any]:
    from django.contrib.auth.hashers import get_hasher

    timings: dict[str, Any] = {}
    for name in ("argon2", "pbkdf2_sha256"):
        hasher = get_hasher(name)
        encoded = hasher.encode("correct horse battery", hasher.salt())
        samples = []
        for _ in range(rounds):
            began = time.perf_counter()
            hasher.verify("correct horse battery", encoded)
            samples.append((time.perf_counter() - began) * 1000)
        timings[name] = summary(samples)
    return timings


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None)
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args(argv)

    database_url = fresh_database(args.database_url, "signin.sqlite3")
    manage(database_url, "migrate", "--verbosity", "0")
    setup_django(database_url)
    from django.contrib.auth.models import User
    from django.db import connections

    # A person per round: django-axes pauses a user name after 10 failures, whatever the address.
    password = secrets.token_urlsafe(12)
    usernames = [f"bench-signin-{index}" for index in range(args.rounds + 1)]
    for username in usernames:
        User.objects.create_user(username=username, password=password)
    connections.close_all()
    results: dict[str, Any] = {"machine": machine(), "load_before": loadavg()}
    server = ServedProcess(
        database_url,
        shape="dockerfile",
        log_path=BENCH_DIR / "signin.log",
        extra_env={"LOG_LEVEL": "WARNING"},  # the CMD takes the address from X-Forwarded-For
    ).start()
    right, wrong = [], []
    try:
        timed_post(server.url, usernames[-1], password, "198.51.100.1")  # warm up
        for index, username in enumerate(usernames[:-1]):
            address = f"198.51.{index // 250}.{index % 250 + 1}"
            status, ms = timed_post(server.url, username, password, address)
            assert status == 302, status
            right.append(ms)
            status, ms = timed_post(server.url, username, "not-" + password, address)
            assert status == 200, status
            wrong.append(ms)
    finally:
        server.stop()
    results.update(
        {
            "right_password_ms": summary(right),
            "wrong_password_ms": summary(wrong),
            "hasher_verify_ms": hasher_ms(10),
            "load_after": loadavg(),
        }
    )
    (BENCH_DIR / "signin.json").write_text(json.dumps(results, indent=2))
    print(f"load before/after: {results['load_before']} / {results['load_after']}")
    for key in ("right_password_ms", "wrong_password_ms"):
        stats = results[key]
        print(f"  POST /signin, {key[:-3]:<16} p50 {stats['p50']:>7} ms   p95 {stats['p95']:>7} ms")
    for name, stats in results["hasher_verify_ms"].items():
        print(f"  {name:<14} verify            p50 {stats['p50']:>7} ms")


if __name__ == "__main__":
    sys.exit(main())
