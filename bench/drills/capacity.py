"""Drill 5 (issue 34): one console replica driven past its capacity, and back.

    uv run python bench/drills/capacity.py [--database-url mysql://root@127.0.0.1:3306/drill_capacity]
        [--redis-url redis://127.0.0.1:6379/13] [--people 64] [--max-in-flight 32]
        [--baseline 20] [--overload 45] [--recovery 30]

The rig of the other drills with one console replica: the recovery API, the console (one worker
of the production shape, ``CONSOLE_MAX_IN_FLIGHT`` as given, 32 by default as in production)
and the reconciler, each its own process, on MariaDB (or SQLite: ``--database-url sqlite:///...``)
and Redis through proxies. ``--people`` operators are signed in first; each walks the review
wizard the way a browser without JavaScript does (the task page, verify, the checklist, decide,
confirm, the receipt: six requests) on a task of its own, again and again. Three phases:

1. **baseline** (``--baseline`` s): 3 people, 0.2 s between walks — the replica's normal p50;
2. **overload** (``--overload`` s): every person at once, back to back, no pause — more
   requests at once than the replica serves (``--people`` > ``--max-in-flight``);
3. **recovery** (``--recovery`` s): 3 people again, as in the baseline.

A person (the load generator) whose request is answered 503 with ``Retry-After`` reads the page,
waits as long as it says and sends the same request again, as a person would. The drill checks
that every such answer is the busy page that says so (and, for a confirmation, that nothing was
stored: its task has no submission at that moment), counts them, samples the replica's
``/metrics`` (requests in flight, requests shed) every half second, and at the end waits until
every decision is applied and counts: lost (must be 0), duplicated (must be 0), stored more than
once (must be 0). It passes when the replica shed during the overload with busy pages only,
nothing was lost or duplicated, and the p50 of the recovery phase's last 15 s is back to
normal (at most 1.5 times the baseline's p50, or the baseline's + 25 ms).

Results: stdout and ``var/bench/drill-capacity.json``; docs/reliability.md; the procedure
(reading the figures, adding replicas): docs/runbooks.md "Adding capacity".
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import queue
import re
import secrets
import statistics
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    ROOT,
    Decision,
    drill_database,
    drop_drill_database,
    migrate_and_seed,
    settle,
)

QUIET_PEOPLE = 3
QUIET_PAUSE_S = 0.2
MAX_TRIES = 60  # sends of one request a person makes before giving up (shed each time)
REVIEW_PATH = re.compile(r"^/tasks/([0-9a-f]{32})/review$")
METRIC = re.compile(r"^(orbit_http_requests_in_flight|orbit_http_requests_shed_total) (\S+)$", re.M)
RECOVERED_WINDOW_S = 15.0


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="mysql://root@127.0.0.1:3306/drill_capacity")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--people", type=int, default=64)
    parser.add_argument("--max-in-flight", type=int, default=32)
    parser.add_argument("--baseline", type=float, default=20.0)
    parser.add_argument("--overload", type=float, default=45.0)
    parser.add_argument("--recovery", type=float, default=30.0)
    parser.add_argument("--keep-database", action="store_true")
    return parser.parse_args(argv)


class Record:
    """Every request the people sent (each send of it), what came back and when."""

    def __init__(self) -> None:
        self.began = time.monotonic()
        self.phase = "setup"
        self.requests: list[dict[str, Any]] = []  # t, phase, status, ms, shed
        self.shed_pages: Counter[str] = Counter()  # what each 503 said
        self.shed_confirmations: Counter[str] = Counter()  # nothing stored / stored
        self.errors: list[str] = []
        self.decisions: list[Decision] = []
        self.samples: list[dict[str, Any]] = []  # the replica's /metrics every 0.5 s
        self.lock = threading.Lock()

    def now(self) -> float:
        return time.monotonic() - self.began

    def note(self, **entry: Any) -> None:
        with self.lock:
            self.requests.append({"t": round(self.now(), 3), "phase": self.phase, **entry})


class SheddingAware(httpx.HTTPTransport):
    """A person's browser: a 503 with ``Retry-After`` is read (it must be the busy page that
    says so), waited out and sent again; everything is noted."""

    def __init__(self, record: Record) -> None:
        super().__init__()
        self.record = record

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response: httpx.Response | None = None
        for _ in range(MAX_TRIES):
            began = time.monotonic()
            response = super().handle_request(request)
            response.read()
            elapsed_ms = (time.monotonic() - began) * 1000
            shed = response.status_code == 503 and "retry-after" in response.headers
            self.record.note(status=response.status_code, ms=round(elapsed_ms, 1), shed=shed)
            if not shed:
                return response
            self._check(request, response)
            time.sleep(float(response.headers["retry-after"]))
        assert response is not None
        return response

    def _check(self, request: httpx.Request, response: httpx.Response) -> None:
        said = 'id="busy"' in response.text
        self.record.shed_pages["busy page" if said else "503 without the busy page"] += 1
        found = REVIEW_PATH.match(request.url.path)
        if request.method == "POST" and found and b"nav=submit" in request.content:
            from django.db import connection

            from orbit_console.decisions.models import Submission

            stored = Submission.objects.filter(task_id=found.group(1)).exists()
            told = 'id="busy-not-stored"' in response.text
            key = "stored" if stored else "nothing stored"
            self.record.shed_confirmations[f"{key}, {'told' if told else 'not told'}"] += 1
            connection.close()


class People:
    """One thread per person; the first ``active`` of them walk, the others wait."""

    def __init__(self, url: str, people: list[Any], tasks: queue.Queue[str], record: Record):
        self.url, self.people, self.tasks, self.record = url, people, tasks, record
        self.active = 0
        self.pause = QUIET_PAUSE_S
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def start(self) -> People:
        from tests.console.web import Console

        consoles = []
        for person in self.people:  # signed in one after another, before the load
            console = Console(self.url)
            console.http.close()
            console.http = httpx.Client(
                base_url=self.url,
                timeout=60,
                follow_redirects=False,
                transport=SheddingAware(self.record),
            )
            consoles.append(console.sign_in(person))
        for index, console in enumerate(consoles):
            thread = threading.Thread(target=self._run, args=(index, console), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _run(self, index: int, console: Any) -> None:
        from django.db import connection

        try:
            while not self._stop.is_set():
                if index >= self.active:
                    time.sleep(0.05)
                    continue
                with contextlib.suppress(queue.Empty):
                    self._walk(console, self.tasks.get(timeout=1))
                if self.pause:
                    time.sleep(self.pause)
        finally:
            console.close()
            connection.close()

    def _walk(self, console: Any, task_id: str) -> None:
        from bench.faults import SUBMISSION_LINK
        from tests.console.web import review_values, wizard_submit, wizard_to_confirm

        decision = Decision(task_id, "review", started=self.record.now())
        try:
            page = console.get(f"/tasks/{task_id}")
            assert page.status_code == 200, f"task page {page.status_code}"
            confirm = wizard_to_confirm(console, task_id, "review", review_values())
            sent = wizard_submit(console, task_id, "review", confirm.text)
            found = SUBMISSION_LINK.fullmatch(sent.headers.get("location", ""))
            assert sent.status_code == 303 and found, f"confirm {sent.status_code}"
            decision.first, decision.submission_id = "receipt", found.group(1)
            with self.record.lock:
                self.record.decisions.append(decision)
            receipt = console.get(f"/submissions/{found.group(1)}")
            assert receipt.status_code == 200, f"receipt {receipt.status_code}"
        except (AssertionError, httpx.HTTPError) as error:
            with self.record.lock:
                self.record.errors.append(
                    f"{self.record.phase} {self.record.now():.1f}s {type(error).__name__}: "
                    f"{error!s:.100}"
                )


def produce(tasks: queue.Queue[str], queue_id: str, stop: threading.Event) -> None:
    """Keep the pool of tasks in NEEDS_REVIEW stocked (one thread: the queue's row is locked
    for each)."""
    from django.db import connection

    from bench.faults import fresh_task

    while not stop.is_set():
        if tasks.qsize() > 200:
            time.sleep(0.1)
            continue
        tasks.put(fresh_task(queue_id, "review"))
    connection.close()


def sample(url: str, token: str, record: Record, stop: threading.Event) -> None:
    with httpx.Client(headers={"Authorization": f"Bearer {token}"}, timeout=5) as client:
        while not stop.wait(0.5):
            with contextlib.suppress(httpx.HTTPError):
                answer = client.get(f"{url}/metrics")
                values = {name: float(v) for name, v in METRIC.findall(answer.text)}
                with record.lock:
                    record.samples.append({"t": record.now(), "phase": record.phase, **values})


def percentile(values: list[float], share: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))], 1)


def phase_figures(record: Record, phase: str, seconds: float) -> dict[str, Any]:
    sent = [r for r in record.requests if r["phase"] == phase]
    served = [r["ms"] for r in sent if not r["shed"]]
    shed = [r for r in sent if r["shed"]]
    made = sum(1 for r in sent if r["status"] == 303)
    samples = [s for s in record.samples if s["phase"] == phase]
    in_flight = [s.get("orbit_http_requests_in_flight", 0.0) for s in samples]
    return {
        "seconds": round(seconds, 1),
        "requests": len(sent),
        "served": len(served),
        "shed": len(shed),
        "shed_share": round(len(shed) / len(sent), 3) if sent else 0,
        "served_p50_ms": percentile(served, 0.5),
        "served_p95_ms": percentile(served, 0.95),
        "shed_p50_ms": percentile([r["ms"] for r in shed], 0.5),
        "statuses": dict(Counter(str(r["status"]) for r in sent)),
        "decisions_confirmed": made,
        "wizards_a_minute": round(made * 60 / seconds, 1) if seconds else 0,
        "served_a_second": round(len(served) / seconds, 1) if seconds else 0,
        "in_flight_max": max(in_flight, default=None),
        "in_flight_mean": round(statistics.fmean(in_flight), 1) if in_flight else None,
    }


def recovery_figures(record: Record, overload_end: float, end: float, normal: float) -> Any:
    """When, after the overload, the p50 of 5 s windows of served requests came back to
    ``normal``; and the p50 of the phase's last ``RECOVERED_WINDOW_S``."""
    served = [r for r in record.requests if r["phase"] == "recovery" and not r["shed"]]
    back_after = None
    window = overload_end
    while window < end:
        inside = [r["ms"] for r in served if window <= r["t"] < window + 5]
        p50 = percentile(inside, 0.5)
        if p50 is not None and p50 <= normal:
            back_after = round(window + 5 - overload_end, 1)
            break
        window += 5
    last = [r["ms"] for r in served if r["t"] >= end - RECOVERED_WINDOW_S]
    shed_late = sum(
        1
        for r in record.requests
        if r["phase"] == "recovery" and r["shed"] and r["t"] >= end - RECOVERED_WINDOW_S
    )
    return {
        "p50_back_to_normal_after_s": back_after,
        "last_window_p50_ms": percentile(last, 0.5),
        "shed_in_last_window": shed_late,
    }


def stored_more_than_once(decisions: list[Decision]) -> int:
    from django.db import connection
    from django.db.models import Count

    from orbit_console.decisions.models import Submission

    tasks = [d.task_id for d in decisions]
    extra = (
        Submission.objects.filter(task_id__in=tasks)
        .values("task_id")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    connection.close()
    return extra


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from support import BENCH_DIR, loadavg, machine

    from bench.faults import RIG_ENV, Rig, create_rig_user, drop_rig_user, make_operator

    os.environ.update(RIG_ENV)
    mysql = args.database_url.startswith("mysql")
    database_url = drill_database(args.database_url) if mysql else args.database_url
    metrics_token = secrets.token_urlsafe(16)
    os.environ.update(
        {
            "CONSOLE_MAX_IN_FLIGHT": str(args.max_in_flight),
            "CONSOLE_SHED_RETRY_AFTER_SECONDS": "2",
            "METRICS_TOKEN": metrics_token,
        }
    )
    seeded = migrate_and_seed(database_url)
    from django.db import connections

    rig_password = secrets.token_urlsafe(16)
    if mysql:
        create_rig_user(rig_password)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    rig = Rig(
        database_url=database_url,
        redis_url=args.redis_url or None,
        env=env,
        logs=BENCH_DIR,
        rig_password=rig_password if mysql else None,
    )
    record = Record()
    results: dict[str, Any] = {
        "machine": machine(),
        "load_before": loadavg(),
        "database": "MariaDB" if mysql else "SQLite",
        "people": args.people,
        "max_in_flight": args.max_in_flight,
    }
    tasks: queue.Queue[str] = queue.Queue()
    stop = threading.Event()
    began_all = time.monotonic()
    people = None
    try:
        print("stocking tasks and signing people in …", flush=True)
        producer = threading.Thread(
            target=produce, args=(tasks, seeded["queue_id"], stop), daemon=True
        )
        producer.start()
        operators = [
            make_operator(seeded["namespace_id"], f"capacity-{i}") for i in range(args.people)
        ]
        rig.start()
        url = rig.console_url
        threading.Thread(
            target=sample, args=(url, metrics_token, record, stop), daemon=True
        ).start()
        people = People(url, operators, tasks, record).start()
        while tasks.qsize() < 150:
            time.sleep(0.2)
        phases: dict[str, tuple[float, float]] = {}
        for phase, active, pause, seconds in (
            ("baseline", QUIET_PEOPLE, QUIET_PAUSE_S, args.baseline),
            ("overload", args.people, 0.0, args.overload),
            ("recovery", QUIET_PEOPLE, QUIET_PAUSE_S, args.recovery),
        ):
            record.phase = phase
            people.pause, people.active = pause, active
            start = record.now()
            print(f"{phase}: {active} people for {seconds:.0f} s", flush=True)
            time.sleep(seconds)
            phases[phase] = (start, record.now())
        record.phase = "after"
        people.active = 0
        people.stop()
        people = None
        stop.set()
        results["phases"] = {
            name: phase_figures(record, name, end - start) for name, (start, end) in phases.items()
        }
        baseline_p50 = results["phases"]["baseline"]["served_p50_ms"] or 0.0
        normal = max(1.5 * baseline_p50, baseline_p50 + 25)
        results["normal_p50_bound_ms"] = round(normal, 1)
        results["recovery"] = recovery_figures(
            record, phases["overload"][1], phases["recovery"][1], normal
        )
        results["shed_pages"] = dict(record.shed_pages)
        results["shed_confirmations"] = dict(record.shed_confirmations)
        results["errors"] = record.errors[:20]
        results["error_count"] = len(record.errors)
        print("settling …", flush=True)
        results["decisions"] = settle(record.decisions)
        results["decisions"]["stored_more_than_once"] = stored_more_than_once(record.decisions)
        results["shed_total_at_replica"] = max(
            (s.get("orbit_http_requests_shed_total", 0.0) for s in record.samples), default=None
        )
    finally:
        stop.set()
        if people is not None:
            people.stop()
        rig.stop()
        if mysql:
            drop_rig_user()
        connections.close_all()
        if mysql and not args.keep_database:
            drop_drill_database(database_url)
    results["seconds"] = round(time.monotonic() - began_all)
    results["load_after"] = loadavg()
    (BENCH_DIR / "drill-capacity.json").write_text(json.dumps(results, indent=2))
    printed = {k: v for k, v in results.items() if k != "machine"}
    printed["decisions"] = {k: v for k, v in results["decisions"].items() if k != "not_succeeded"}
    print(json.dumps(printed, indent=2))
    print(f"\nload average before/after: {results['load_before']} / {results['load_after']}")
    overload = results["phases"]["overload"]
    decided = results["decisions"]
    checks = {
        "shed during the overload": overload["shed"] > 0,
        "every 503 was the busy page": set(record.shed_pages) <= {"busy page"},
        "no shed confirmation had stored anything, each said so": set(record.shed_confirmations)
        <= {"nothing stored, told"},
        "nothing lost": decided["lost"] == 0 and decided["decisions"] > 0,
        "nothing duplicated": decided["duplicated"] == 0 and decided["stored_more_than_once"] == 0,
        "p50 back to normal": (results["recovery"]["last_window_p50_ms"] or 1e9) <= normal,
    }
    results["checks"] = checks
    (BENCH_DIR / "drill-capacity.json").write_text(json.dumps(results, indent=2))
    for name, ok in checks.items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")
    passed = all(checks.values())
    print("PASSED" if passed else "FAILED")
    return 0 if passed else 1


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
