"""Memory of the audit explorer's streamed export, and of ``manage.py audit verify``.

    uv run python bench/export_memory.py [--sizes 10000,100000] [--formats csv,jsonl]
        [--database-url mysql://root@127.0.0.1:3306/orbit_bench] [--client-rate-kib 0]

What it does, for each size N (ascending):

1. A fresh database (an SQLite file under ``var/bench/``, or the MySQL/MariaDB database named
   in ``--database-url``, dropped and created again; its name must contain "bench"), migrated
   with ``manage.py migrate`` and seeded with ``manage.py orbit seed`` (a namespace for the
   auditor's credential).
2. In this process (Django set up on the same ``DATABASE_URL``): an auditor, an operator, 1 000
   stored decisions of the operator's, and console events bulk-inserted until the record holds N
   entries. Each event is appended the way ``console/chain.py`` appends one — next ``seq``,
   ``prev_hash`` = the previous ``entry_hash``, ``entry_hash`` = ``chain.entry_hash(event)`` —
   under the chain head's row lock, and the head is moved to the last one, so the chain stays
   valid for ``audit verify``. Kinds, notes and submissions vary like real entries.
3. ``manage.py audit verify`` in its own process: wall time and peak RSS (``ru_maxrss`` from
   ``wait4``), entries checked, exit status.
4. Per format: a fresh worker process (``orbit_console.asgi:application``) on that database;
   the auditor signs in through the form; a warm-up (the explorer page, and an export matching
   nothing) loads every code path; then the baseline ``VmRSS``/``VmHWM`` is read from
   ``/proc/<pid>/status`` and the whole unfiltered record is exported through
   ``/audit/export.<fmt>`` with httpx, while a thread samples the server's ``VmRSS`` every few
   milliseconds. Reported: baseline RSS, peak sampled RSS, ``VmHWM`` after the export, bytes and
   rows received, time to the last byte. The server is stopped after each export, so that each
   ``VmHWM`` belongs to one export.
5. For scale, a separate process loads the same entries the naive way (one query, every row
   rendered into one string, as a non-streamed ``HttpResponse`` would) and reports its growth.

``--client-rate-kib R`` reads the response at about R KiB/s instead of as fast as possible (a
slow download): the server must then hold back, not buffer the rest of the export.

Results: a table on stdout and ``var/bench/export_memory[-<label>].json``. Numbers are written up
in docs/performance.md ("Audit export memory"); they are never asserted in tests.
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
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from support import (
    BENCH_DIR,
    ROOT,
    WorkerProcess,
    fresh_database,
    loadavg,
    machine,
    manage,
    server_env,
    setup_django,
    signin_form,
)

KINDS = [
    "submission.stored",
    "submission.sent",
    "submission.receipt",
    "submission.outcome_unknown",
    "submission.resent",
    "proposal.proposed",
]
SUBMISSIONS = 1000
INSERT_BATCH = 2000

NAIVE_EXPORT = """
import os, sys, time
sys.path.insert(0, os.getcwd())
import django
django.setup()
from orbit_console.console import explorer

def status(name):
    for line in open("/proc/self/status"):
        if line.startswith(name + ":"):
            return int(line.split()[1])

before = status("VmRSS")
started = time.monotonic()
render = explorer.CsvRender()
rows = list(explorer.events(explorer.Filters()).order_by("-created_at", "-id"))
body = render.header() + "".join(render.line(explorer.as_row(event)) for event in rows)
print(len(rows), len(body.encode()), before, status("VmHWM"), time.monotonic() - started)
"""


# --- Machine and processes ----------------------------------------------------------------------


def proc_status(pid: int) -> dict[str, int]:
    """``VmRSS`` and ``VmHWM`` of a process, in KiB."""
    values: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("VmRSS", "VmHWM"):
            values[name] = int(rest.split()[0])
    return values


def mib(kib: int | float) -> float:
    return round(kib / 1024, 1)


# --- Database -----------------------------------------------------------------------------------


@dataclass
class People:
    auditor: tuple[str, str]  # (username, password)
    operator_id: int
    submission_ids: list[str]


def make_people(namespace_id: str) -> People:
    from django.contrib.auth.models import User
    from django.db import transaction

    from orbit_console.decisions.models import Submission
    from orbit_console.lib.ids import new_id
    from orbit_console.people.credentials import person_enroll, person_roles_set

    password = secrets.token_urlsafe(12)
    with transaction.atomic():
        auditor = User.objects.create_user(username="bench-auditor", password=password)
        person_enroll(user=auditor, roles=frozenset({"auditor"}), namespace_id=namespace_id)
        operator = User.objects.create_user(username="bench-operator", password=password)
        person_roles_set(user=operator, roles=frozenset({"operator"}))
        now = datetime.now(UTC)
        submissions = [
            Submission(
                id=(submission_id := new_id()),
                action="review",
                task_id=new_id(),
                queue_id=new_id(),
                namespace_id=namespace_id,  # the auditor's: the explorer reads only that
                expected_revision="3",
                idempotency_key=f"orbit-console-{submission_id}",
                body='{"expected_revision": "3"}',
                created_by=operator,
                sent_as=operator,
                created_at=now,
                state=["succeeded", "rejected", "unknown", "pending"][index % 4],
                audit_id=new_id() if index % 4 == 0 else "",
                reconcile_deadline=now + timedelta(hours=24),
            )
            for index in range(SUBMISSIONS)
        ]
        Submission.objects.bulk_create(submissions, batch_size=500)
    return People(("bench-auditor", password), operator.pk, [s.id for s in submissions])


def fill_record(people: People, total: int) -> tuple[int, float]:
    """Append console events until the record holds ``total`` entries, with valid chain hashes,
    as ``chain.append`` would one at a time. Returns (entries added, seconds)."""
    from django.db import transaction

    from orbit_console.decisions import chain
    from orbit_console.decisions.models import ChainHead, ConsoleEvent, Submission
    from orbit_console.lib import auditkeys
    from orbit_console.lib.ids import new_id

    started = time.monotonic()
    subjects = {
        s.id: (s.task_id, s.queue_id, s.namespace_id)
        for s in Submission.objects.filter(id__in=people.submission_ids)
    }
    ids = people.submission_ids
    with transaction.atomic():
        head = ChainHead.objects.select_for_update().get(name=chain.CONSOLE_CHAIN)
        missing = total - head.seq
        if missing <= 0:
            return 0, 0.0
        seq, previous = head.seq, head.last_hash
        moment = datetime.now(UTC) - timedelta(milliseconds=missing + 1000)
        batch: list[ConsoleEvent] = []
        for index in range(missing):
            submission_id = ids[index % len(ids)]
            task_id, queue_id, namespace_id = subjects[submission_id]
            seq += 1
            event = ConsoleEvent(
                id=new_id(),
                seq=seq,
                kind=KINDS[index % len(KINDS)],
                task_id=task_id,
                queue_id=queue_id,
                namespace_id=namespace_id,
                submission_id=submission_id,
                actor_id=people.operator_id,
                note=f"bench entry {seq}: checked the object store; evidence:bench-{seq}",
                created_at=moment + timedelta(milliseconds=index),
                prev_hash=previous,
                key_id=auditkeys.current_key_id(),
            )
            event.entry_hash = chain.entry_hash(event)
            previous = event.entry_hash
            batch.append(event)
            if len(batch) == INSERT_BATCH:
                ConsoleEvent.objects.bulk_create(batch)
                batch = []
        if batch:
            ConsoleEvent.objects.bulk_create(batch)
        head.seq, head.last_hash = seq, previous
        head.save(update_fields=["seq", "last_hash"])
    return missing, time.monotonic() - started


def record_size() -> int:
    from orbit_console.decisions.models import ConsoleEvent

    return ConsoleEvent.objects.count()


# --- Measurements -------------------------------------------------------------------------------


class Sampler(threading.Thread):
    """The highest VmRSS of a process seen while it runs."""

    def __init__(self, pid: int, interval: float) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.interval = interval
        self.peak_kib = 0
        self.samples = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            try:
                rss = proc_status(self.pid)["VmRSS"]
            except (FileNotFoundError, ProcessLookupError, KeyError):
                return
            self.peak_kib = max(self.peak_kib, rss)
            self.samples += 1
            time.sleep(self.interval)

    def stop(self) -> int:
        self._stop_event.set()
        self.join()
        return self.peak_kib


@dataclass
class Verification:
    entries: int
    exit_status: int
    seconds: float
    peak_rss_mib: float
    output: str


def measure_verify(database_url: str, entries: int, interval: float) -> Verification:
    started = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "audit", "verify"],
        cwd=ROOT,
        env=server_env(database_url),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    sampler = Sampler(process.pid, interval)
    sampler.start()
    assert process.stdout is not None
    output = process.stdout.read().decode()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.monotonic() - started
    sampler.stop()
    peak = max(usage.ru_maxrss, sampler.peak_kib)
    return Verification(entries, process.returncode, round(seconds, 2), mib(peak), output.strip())


def signed_in(base: str, username: str, password: str) -> httpx.Client:
    """A client with the person's session cookie (close it when done)."""
    http = httpx.Client(base_url=base, timeout=600)
    page = http.get("/signin")
    answer = http.post("/signin", data=signin_form(page.text, username, password))
    if answer.status_code != 302:
        raise SystemExit(f"could not sign in as {username}: {answer.status_code}")
    return http


@dataclass
class Export:
    entries_in_record: int
    format: str
    rows: int
    bytes: int
    seconds: float
    baseline_rss_mib: float
    baseline_hwm_mib: float
    peak_rss_mib: float
    hwm_after_mib: float
    growth_mib: float
    samples: int
    client_rate_kib: int
    load: str


def measure_export(
    database_url: str, people: People, fmt: str, interval: float, rate_kib: int
) -> Export:
    server = WorkerProcess(
        database_url, log_path=BENCH_DIR / "export-server.log", append_log=True, start_timeout=120
    ).start()
    try:
        http = signed_in(server.url, *people.auditor)
        try:
            assert http.get("/audit").status_code == 200
            warm = http.get(f"/audit/export.{fmt}", params={"person": "nobody"})
            assert warm.status_code == 200, warm.text
            entries = record_size() + 1  # the export records itself before it streams
            time.sleep(1.0)
            baseline = proc_status(server.pid)
            sampler = Sampler(server.pid, interval)
            sampler.start()
            received = rows = 0
            started = time.monotonic()
            with http.stream("GET", f"/audit/export.{fmt}") as response:
                assert response.status_code == 200, response.status_code
                assert "content-length" not in response.headers
                for chunk in response.iter_raw(65536):
                    received += len(chunk)
                    rows += chunk.count(b"\n")
                    if rate_kib:
                        time.sleep(len(chunk) / 1024 / rate_kib)
            seconds = time.monotonic() - started
            peak = sampler.stop()
            after = proc_status(server.pid)
        finally:
            http.close()
    finally:
        server.stop()
    header_rows = 1 if fmt == "csv" else 0
    return Export(
        entries_in_record=entries,
        format=fmt,
        rows=rows - header_rows,
        bytes=received,
        seconds=round(seconds, 2),
        baseline_rss_mib=mib(baseline["VmRSS"]),
        baseline_hwm_mib=mib(baseline["VmHWM"]),
        peak_rss_mib=mib(peak),
        hwm_after_mib=mib(after["VmHWM"]),
        growth_mib=mib(max(peak, after["VmHWM"]) - baseline["VmRSS"]),
        samples=sampler.samples,
        client_rate_kib=rate_kib,
        load=loadavg(),
    )


def measure_naive(database_url: str) -> dict[str, Any]:
    """The same entries loaded and rendered at once, in a process of its own."""
    done = subprocess.run(
        [sys.executable, "-c", NAIVE_EXPORT],
        cwd=ROOT,
        env=server_env(database_url, DJANGO_SETTINGS_MODULE="orbit_console.settings"),
        capture_output=True,
        text=True,
        check=True,
    )
    rows, size, before, hwm, seconds = done.stdout.split()
    return {
        "rows": int(rows),
        "bytes": int(size),
        "rss_before_mib": mib(int(before)),
        "hwm_mib": mib(int(hwm)),
        "growth_mib": mib(int(hwm) - int(before)),
        "seconds": round(float(seconds), 2),
    }


# --- Entry point --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="10000,100000", help="entries in the record")
    parser.add_argument("--formats", default="csv,jsonl", help="export formats")
    parser.add_argument("--database-url", help="mysql://.../<name with 'bench'>; else SQLite")
    parser.add_argument("--interval", type=float, default=0.005, help="RSS sampling period (s)")
    parser.add_argument("--client-rate-kib", type=int, default=0, help="slow reader (KiB/s)")
    parser.add_argument("--no-naive", action="store_true", help="skip the naive comparison")
    parser.add_argument("--label", default="", help="suffix of the JSON results file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    sizes = sorted(int(size) for size in args.sizes.split(","))
    formats = [fmt for fmt in args.formats.split(",") if fmt]
    database_url = fresh_database(args.database_url, "export.sqlite3")
    database = "MariaDB" if database_url.startswith("mysql") else "SQLite"
    print(f"{database}: migrating and seeding {database_url}", flush=True)
    manage(database_url, "migrate", "--no-input")
    seeded = json.loads(manage(database_url, "orbit", "seed"))
    setup_django(database_url)
    people = make_people(seeded["namespace_id"])

    exports: list[Export] = []
    verifications: list[Verification] = []
    naive: list[dict[str, Any]] = []
    fills: list[dict[str, Any]] = []
    for size in sizes:
        added, seconds = fill_record(people, size)
        fills.append({"size": size, "added": added, "seconds": round(seconds, 1)})
        print(f"\nrecord: {record_size()} entries (+{added} in {seconds:.1f} s)", flush=True)
        verification = measure_verify(database_url, record_size(), args.interval)
        verifications.append(verification)
        print(
            f"  audit verify: exit {verification.exit_status}, {verification.seconds} s, "
            f"peak RSS {verification.peak_rss_mib} MiB",
            flush=True,
        )
        for fmt in formats:
            export = measure_export(database_url, people, fmt, args.interval, args.client_rate_kib)
            exports.append(export)
            print(
                f"  export.{fmt}: {export.rows} rows, {export.bytes / 1e6:.1f} MB in "
                f"{export.seconds} s; RSS {export.baseline_rss_mib} -> peak "
                f"{export.peak_rss_mib} MiB (VmHWM {export.hwm_after_mib}), "
                f"growth {export.growth_mib} MiB",
                flush=True,
            )
        if not args.no_naive:
            naive.append({"entries": record_size(), **measure_naive(database_url)})
            print(f"  naive (load all, render once): {naive[-1]}", flush=True)

    print(
        f"\n{'entries':>8} {'fmt':>5} {'rows':>8} {'MB':>6} {'s':>6} "
        f"{'base MiB':>8} {'peak MiB':>8} {'HWM MiB':>8} {'growth':>7}"
    )
    for export in exports:
        print(
            f"{export.entries_in_record:>8} {export.format:>5} {export.rows:>8} "
            f"{export.bytes / 1e6:>6.1f} {export.seconds:>6.1f} {export.baseline_rss_mib:>8} "
            f"{export.peak_rss_mib:>8} {export.hwm_after_mib:>8} {export.growth_mib:>7}"
        )
    for verification in verifications:
        print(
            f"verify {verification.entries:>8} entries: {verification.seconds:>6} s, "
            f"peak RSS {verification.peak_rss_mib} MiB, exit {verification.exit_status}"
        )
    path = BENCH_DIR / (f"export_memory-{args.label}.json" if args.label else "export_memory.json")
    path.write_text(
        json.dumps(
            {
                "command": " ".join(["uv run python", *sys.argv]),
                "machine": machine(),
                "database": database,
                "fills": fills,
                "exports": [asdict(export) for export in exports],
                "verifications": [asdict(verification) for verification in verifications],
                "naive": naive,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"\nresults: {path}")


if __name__ == "__main__":
    main()
