"""Operators walking the review wizard: capacity, and a busy incident with people thinking.

    uv run python bench/wizard.py --database-url mysql://root@127.0.0.1:3306/orbit_bench
        [--redis-url redis://127.0.0.1:6379/14] [--operators 20] [--seconds 60]
        [--think 0|1] [--server dockerfile|daphne] [--label L]

The world: a fresh database (``support.fresh_database``), ``orbit seed``, ``--operators``
console people with the operator role (each with an embedded credential, as
``console user`` gives), and enough tasks in NEEDS_REVIEW for every walk to decide a task of
its own. The server runs as in ``bench/review_api.py`` (by default the Dockerfile's ``CMD``),
with direct submission (``CONSOLE_REVIEW_APPROVAL=off``: no four-eyes proposal in the way).

Each operator is a thread with its own session (signed in through the sign-in form) that walks
the wizard the way a browser without JavaScript does, for ``--seconds``:

1. ``GET /tasks/{id}`` (the task page), 2. ``GET /tasks/{id}/review`` (verify),
3. ``POST`` the checklist (→ decide), 4. ``POST`` outcome, result, reason, evidence (→ confirm),
5. ``POST`` the confirmation (→ 303 to the submission), 6. ``GET /submissions/{id}`` (the
   receipt, which must say the API stored the decision).

With ``--think 0`` the operators go back to back (capacity: wizards a minute). With
``--think 1`` each waits a second between steps (a busy incident); operator i starts i/N of a
second late, so that the twenty are not in lockstep. Reported: wizards a minute,
the time from confirming to seeing the receipt (steps 5 and 6), each step's latency, the whole
walk, and the server's CPU. Results: stdout and ``var/bench/wizard[-<label>].json``; written
up in docs/performance.md, never asserted in tests.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import secrets
import shlex
import sys
import threading
import time
from collections.abc import Sequence
from html import unescape
from html.parser import HTMLParser
from typing import Any

import httpx
from support import (
    BENCH_DIR,
    CpuMeter,
    ServedProcess,
    database_statements,
    fresh_database,
    grow,
    loadavg,
    machine,
    manage,
    needs_review_tasks,
    profiled,
    server_arguments,
    setup_django,
    signin_form,
    summary,
)

STEPS = ("task", "verify", "checklist", "decide", "confirm", "receipt")
CHECKS = [
    ("checked_history", "on"),
    ("checked_late_evidence", "on"),
    ("checked_external", "on"),
    ("checked_lease", "on"),
]
DECIDE = [
    ("outcome", "FAILED"),
    ("result", '{"confirmed": true}'),
    ("reason", "Benchmark: the object store shows the write never happened"),
    ("evidence_ref", "evidence:bench"),
]
SUBMISSION = re.compile(r"^/submissions/([0-9a-f]{32})$")


class HiddenFields(HTMLParser):
    """The hidden inputs of the form that carries the wizard's pin."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.forms: list[list[tuple[str, str]]] = []
        self._in_form = False

    def handle_starttag(self, tag: str, attrs_list: list[tuple[str, str | None]]) -> None:
        attrs = {name: value or "" for name, value in attrs_list}
        if tag == "form":
            self._in_form = True
            self.forms.append([])
        elif tag == "input" and self._in_form and attrs.get("type") == "hidden":
            self.forms[-1].append((attrs.get("name", ""), unescape(attrs.get("value", ""))))

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self._in_form = False


def form_data(pairs: list[tuple[str, str]]) -> dict[str, list[str]]:
    """httpx takes repeated fields as lists."""
    data: dict[str, list[str]] = {}
    for name, value in pairs:
        data.setdefault(name, []).append(value)
    return data


def wizard_fields(html: str) -> list[tuple[str, str]]:
    parser = HiddenFields()
    parser.feed(html)
    for fields in parser.forms:
        if any(name == "pin" for name, _ in fields):
            return fields
    raise RuntimeError("the page has no wizard form")


# --- The world ----------------------------------------------------------------------------------


def build_world(database_url: str, operators: int, tasks: int) -> dict[str, Any]:
    manage(database_url, "migrate", "--verbosity", "0")
    seeded = json.loads(manage(database_url, "orbit", "seed"))
    # Operators get tasks:review only where the policy lets them send directly.
    os.environ["CONSOLE_REVIEW_APPROVAL"] = "off"
    setup_django(database_url)
    from django.contrib.auth.models import User
    from django.db import connections, transaction

    from orbit_console.people.credentials import person_enroll

    people: list[tuple[str, str]] = []
    with transaction.atomic():
        for index in range(operators):
            username, password = f"bench-operator-{index}", secrets.token_urlsafe(12)
            user = User.objects.create_user(username=username, password=password)
            person_enroll(
                user=user, roles=frozenset({"operator"}), namespace_id=seeded["namespace_id"]
            )
            people.append((username, password))
    task_ids = needs_review_tasks(seeded, tasks, key_prefix="bench-wizard")
    connections.close_all()
    return {"people": people, "tasks": task_ids, "namespace_id": seeded["namespace_id"]}


# --- One operator -------------------------------------------------------------------------------


class Operator:
    def __init__(self, base: str, username: str, password: str, think: float) -> None:
        self.http = httpx.Client(base_url=base, timeout=60, follow_redirects=False)
        self.think = think
        page = self.http.get("/signin")
        answer = self.http.post("/signin", data=signin_form(page.text, username, password))
        if answer.status_code != 302:
            raise SystemExit(f"{username} could not sign in: {answer.status_code}")

    def _timed(self, step: str, timings: dict[str, float], call: Any) -> httpx.Response:
        if self.think and step != "task":
            time.sleep(self.think)
        began = time.perf_counter()
        response: httpx.Response = call()
        timings[step] = (time.perf_counter() - began) * 1000
        return response

    def walk(self, task_id: str) -> dict[str, float]:
        """One review through the wizard; each step's milliseconds."""
        path = f"/tasks/{task_id}/review"
        timings: dict[str, float] = {}

        def expect(response: httpx.Response, status: int, what: str) -> httpx.Response:
            if response.status_code != status:
                raise RuntimeError(f"{what} of {task_id}: {response.status_code}")
            return response

        expect(
            self._timed("task", timings, lambda: self.http.get(f"/tasks/{task_id}")), 200, "task"
        )
        page = expect(self._timed("verify", timings, lambda: self.http.get(path)), 200, "verify")
        for step, values in (("checklist", CHECKS), ("decide", DECIDE)):
            data = form_data([*wizard_fields(page.text), *values, ("nav", "next")])
            page = expect(
                self._timed(step, timings, lambda data=data: self.http.post(path, data=data)),
                200,
                step,
            )
        confirmed = [("execution_settled", "on"), ("nav", "submit")]
        data = form_data([*wizard_fields(page.text), *confirmed])
        sent = expect(
            self._timed("confirm", timings, lambda: self.http.post(path, data=data)), 303, "confirm"
        )
        location = sent.headers["location"]
        if not SUBMISSION.match(location):
            raise RuntimeError(f"confirm of {task_id} went to {location}")
        receipt = expect(
            self._timed("receipt", timings, lambda: self.http.get(location)), 200, "receipt"
        )
        if 'id="receipt-audit-id"' not in receipt.text:
            raise RuntimeError(f"the receipt of {task_id} shows no stored decision")
        timings["confirm_to_receipt"] = timings["confirm"] + timings["receipt"]
        timings["walk"] = sum(timings[step] for step in STEPS)
        return timings

    def close(self) -> None:
        self.http.close()


def run(base: str, world: dict[str, Any], seconds: float, think: float) -> dict[str, Any]:
    todo: queue.SimpleQueue[str] = queue.SimpleQueue()
    for task_id in world["tasks"]:
        todo.put(task_id)
    operators = [
        Operator(base, username, password, think) for username, password in world["people"]
    ]
    walks: list[dict[str, float]] = []
    errors: list[BaseException] = []
    deadline = time.monotonic() + seconds

    def work(operator: Operator, index: int) -> None:
        # People do not click in step: with think time, operator i starts i/N of it late, so
        # that the steps of the 20 are spread over each second rather than arriving at once.
        time.sleep(think * index / len(operators))
        try:
            while time.monotonic() < deadline:
                try:
                    task_id = todo.get_nowait()
                except queue.Empty:
                    raise RuntimeError("out of tasks: raise the task count") from None
                walks.append(operator.walk(task_id))
        except BaseException as error:
            errors.append(error)

    threads = [
        threading.Thread(target=work, args=(operator, index))
        for index, operator in enumerate(operators)
    ]
    began = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.monotonic() - began
    for operator in operators:
        operator.close()
    if errors:
        raise SystemExit(f"an operator failed: {errors[0]!r}")
    result: dict[str, Any] = {"walks": len(walks), "wizards_per_min": round(60 * len(walks) / wall)}
    for name in (*STEPS, "confirm_to_receipt", "walk"):
        result[f"{name}_ms"] = summary([walk[name] for walk in walks])
    result["slowest_step_p95_ms"] = max(result[f"{step}_ms"]["p95"] for step in STEPS)
    result["first_walks_task_ms"] = sorted(walk["task"] for walk in walks[: len(operators)])
    result["wall_s"] = round(wall, 1)
    return result


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default=None, help="mysql://.../<name with 'bench'>")
    parser.add_argument("--operators", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--think", type=float, default=0)
    parser.add_argument("--tasks", type=int, default=3000)
    server_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    database_url = fresh_database(args.database_url, "wizard.sqlite3")
    world = build_world(database_url, args.operators, args.tasks)
    grown = grow(database_url, world["namespace_id"], args.grow) if args.grow else None
    name = f"wizard{'-' + args.label if args.label else ''}"
    # BENCH_LOG_LEVEL=INFO keeps the access log (one line a request, with its duration).
    extra = {
        "CONSOLE_REVIEW_APPROVAL": "off",
        "LOG_LEVEL": os.environ.get("BENCH_LOG_LEVEL", "WARNING"),
    }
    if args.redis_url:
        extra["REDIS_URL"] = args.redis_url
    server = ServedProcess(
        database_url, shape=args.server, log_path=BENCH_DIR / f"{name}.log", extra_env=extra
    ).start()
    results: dict[str, Any] = {
        "machine": machine(),
        "server": shlex.join(server.command),
        "operators": args.operators,
        "think_s": args.think,
        "grown": grown,
        "load_before": loadavg(),
    }
    try:
        meter = CpuMeter(server.pid)
        profile = str(BENCH_DIR / f"{name}-profile") if args.profile else None
        counted = database_statements(database_url)
        with profiled(server, profile):
            results.update(run(server.url, world, args.seconds, args.think))
        results.update(meter.percent())
        if counted is not None:
            after = database_statements(database_url) or {}
            results["statements_per_walk"] = {
                name: round((after[name] - before) / results["walks"], 1)
                for name, before in counted.items()
            }
    finally:
        server.stop()
    results["load_after"] = loadavg()
    (BENCH_DIR / f"{name}.json").write_text(json.dumps(results, indent=2))
    print(
        f"\nserver: {results['server']}   load before/after: {results['load_before']} / "
        f"{results['load_after']}"
    )
    print(
        f"{args.operators} operators, think {args.think} s: {results['wizards_per_min']} "
        f"wizards/min ({results['walks']} in {results['wall_s']} s); CPU: server "
        f"{results['server_cpu_pct']} %, this client {results['client_cpu_pct']} %, database "
        f"{results.get('database_cpu_pct', '?')} %"
    )
    if "statements_per_walk" in results:
        print(f"  database statements per walk: {results['statements_per_walk']}")
    for key in (*STEPS, "confirm_to_receipt", "walk"):
        stats = results[f"{key}_ms"]
        print(
            f"  {key:<20} p50 {stats['p50']:>8} ms   p95 {stats['p95']:>8} ms   "
            f"p99 {stats['p99']:>8} ms"
        )


if __name__ == "__main__":
    sys.exit(main())
