"""What the drills share (issue 34): the fault suite's rig (``bench/faults.py``) with a second
console replica behind a balancer, load that walks the wizards while the drill works, a drill
database that is dropped afterwards, and the tally of every decision.

    uv run python bench/drills/<drill>.py [--database-url mysql://root@127.0.0.1:3306/drill_x]

The rig: the recovery API, two console replicas and the reconciler, each its own process; the
API reached through the fault suite's proxy (so that a new API process can take over its port's
traffic: ``Replicas.restart_api``), MariaDB and Redis through TCP proxies, the processes as a
database user with the runtime grants only. The observer (the drill's own process) is on the
database directly: it makes the tasks the operators decide and counts what was applied.

Each run names what it makes on the shared servers after itself (``RUN_ID``): its databases
(``drill_<drill>_<run>``, ``drill_database``), the rig's database user (``bench/faults.py``),
its channel layer's keys in Redis and its files under ``var/bench/``, so that two drills on one
server (two engineers', or two at once) never drop or read each other's (issue 41).
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent.parent
for path in (ROOT, ROOT / "bench"):
    if str(path) not in sys.path:
        sys.path.insert(0, str(path))

from bench.faults import (  # noqa: E402
    SUBMISSION_LINK,
    Person,
    Rig,
    Service,
    _worker,
    free_port,
    fresh_task,
)

SIGNIN = re.compile(r"^/signin")
SETTLE_S = 60.0  # seconds the drill waits, after the load stops, for every decision to settle
RUN_ID = secrets.token_hex(4)  # this run's: the names of what it makes on shared servers
# The live pushes of this run's processes (they inherit it) stay apart from another's in a
# shared Redis database.
os.environ["REDIS_CHANNEL_PREFIX"] = f"drill-{RUN_ID}"


def run_dir(drill: str) -> Path:
    """A folder of this run's own under ``var/bench/`` (checkpoints, dumps)."""
    from support import BENCH_DIR

    folder = BENCH_DIR / f"drill-{drill}-{RUN_ID}"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


# --- The stage -----------------------------------------------------------------------------------


@dataclass
class Stage:
    """A drill's world: its seeded namespace, its operators, and the rig of its processes with
    the two replicas (not started)."""

    seeded: dict[str, Any]
    people: list[Person]
    rig: Rig
    replicas: Replicas


def migrate_and_seed(database_url: str) -> dict[str, Any]:
    """Migrate the drill's database, seed it (``orbit seed``: its namespace, queue and tasks)
    and set this process's Django up on it; what was seeded."""
    import json

    from support import setup_django

    base = {"DATABASE_URL": database_url}
    for command in (("migrate", "--verbosity", "0"), ("orbit", "seed")):
        code, out = run_manage(base, *command)
        assert code == 0, out
    setup_django(database_url)
    seeded: dict[str, Any] = json.loads(out)
    return seeded


def stage(database_url: str, redis_url: str, *, people: int, name: str) -> Stage:
    """Migrate and seed the drill's database, make ``people`` operators (``name-N``) and the
    rig's database user, as every drill starts."""
    import secrets

    from support import BENCH_DIR

    from bench.faults import create_rig_user, make_operator

    seeded = migrate_and_seed(database_url)
    from django.db import connections

    rig_password = secrets.token_urlsafe(16)
    create_rig_user(rig_password)
    operators = [make_operator(seeded["namespace_id"], f"{name}-{n}") for n in range(people)]
    connections.close_all()
    rig = Rig(
        database_url=database_url,
        redis_url=redis_url,
        env={k: v for k, v in os.environ.items() if k != "DATABASE_URL"},
        logs=BENCH_DIR,
        rig_password=rig_password,
    )
    return Stage(seeded, operators, rig, Replicas(rig, BENCH_DIR))


# --- The database -------------------------------------------------------------------------------


def drill_name(database_url: str) -> str:
    """The database ``database_url`` names, if it is a drill's: its name holds the word
    ``drill`` (``drill_backup``, ``orbit_kube_drill_backup``), since a drill drops it."""
    import dj_database_url

    name = str(dj_database_url.parse(database_url)["NAME"])
    if not re.fullmatch(r"(\w+_)?drill_\w+", name):
        raise SystemExit(f"refusing to use {name!r}: a drill's database is named [PREFIX_]drill_*")
    return name


def run_database_url(database_url: str, suffix: str = "") -> str:
    """``database_url`` with this run's database: its name, the run's id, then ``suffix``."""
    name = drill_name(database_url)
    return f"{database_url.rsplit('/', 1)[0]}/{name}_{RUN_ID}{'_' + suffix if suffix else ''}"


def drill_database(database_url: str, *, suffix: str = "") -> str:
    """A new, empty database of this run (``run_database_url``); its URL."""
    return empty_database(run_database_url(database_url, suffix))


def empty_database(database_url: str) -> str:
    """The drill's database ``database_url`` names, dropped and created again, empty."""
    from support import mysql_connect

    name = drill_name(database_url)
    server = mysql_connect(database_url, database=False)
    try:
        cursor = server.cursor()
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    finally:
        server.close()
    return database_url


def drop_drill_database(database_url: str) -> None:
    from support import mysql_connect

    name = drill_name(database_url)
    server = mysql_connect(database_url, database=False)
    try:
        server.cursor().execute(f"DROP DATABASE IF EXISTS `{name}`")
    finally:
        server.close()


# --- Two replicas behind a balancer -------------------------------------------------------------


class Balancer:
    """What a load balancer does for a rolling restart: new requests go to the replicas in
    rotation, round robin; ``drain`` takes one out and waits until the walks it was serving
    have ended (connection draining)."""

    def __init__(self, urls: list[str]) -> None:
        self._urls = list(urls)
        self._busy: Counter[str] = Counter()
        self._turn = 0
        self._lock = threading.Condition()

    @contextlib.contextmanager
    def replica(self) -> Iterator[str]:
        with self._lock:
            while not self._urls:
                self._lock.wait()
            self._turn += 1
            url = self._urls[self._turn % len(self._urls)]
            self._busy[url] += 1
        try:
            yield url
        finally:
            with self._lock:
                self._busy[url] -= 1
                self._lock.notify_all()

    def drain(self, url: str) -> None:
        with self._lock:
            self._urls.remove(url)
            while self._busy[url]:
                self._lock.wait()

    def add(self, url: str) -> None:
        with self._lock:
            self._urls.append(url)
            self._lock.notify_all()


class Replicas:
    """The rig with a second console replica (``console-b``) and a balancer over both."""

    def __init__(self, rig: Rig, logs: Path) -> None:
        self.rig = rig
        port = free_port()
        self.console_b = Service("console-b", _worker(port), dict(rig.console.env), port, logs)
        self.consoles = [rig.console, self.console_b]
        self.balancer = Balancer([self.url(service) for service in self.consoles])
        self.logs = logs

    @staticmethod
    def url(service: Service) -> str:
        return f"http://127.0.0.1:{service.port}"

    def start(self) -> Replicas:
        self.rig.start()
        self.console_b.start()
        return self

    def stop(self) -> None:
        self.console_b.stop()
        self.rig.stop()

    def restart_console(self, service: Service, env: Mapping[str, str]) -> float:
        """Drain one replica, stop it (SIGTERM: it finishes what it serves), start it with
        ``env`` and put it back; the seconds it was out of rotation."""
        began = time.monotonic()
        self.balancer.drain(self.url(service))
        service.stop()
        service.env = {**service.env, **env}
        service.start()
        self.balancer.add(self.url(service))
        return time.monotonic() - began

    def restart_reconciler(self, env: Mapping[str, str]) -> float:
        began = time.monotonic()
        self.rig.reconciler.stop()
        self.rig.reconciler.env = {**self.rig.reconciler.env, **env}
        self.rig.reconciler.start()
        return time.monotonic() - began

    def restart_api(self, env: Mapping[str, str]) -> float:
        """A new API process with ``env`` on a new port; the proxy's new connections go to it,
        then the old one stops (SIGTERM: it finishes what it serves)."""
        began = time.monotonic()
        old = self.rig.api
        port = free_port()
        new = Service(old.name, _worker(port), {**old.env, **env}, port, self.logs)
        new.start()
        self.rig.api_proxy.upstream_port = port
        time.sleep(0.5)  # a connection the proxy opened just before the switch
        old.stop()
        self.rig.api = new
        self.rig.services = (new, self.rig.console, self.rig.reconciler)
        return time.monotonic() - began

    def restart_all(self, env: Mapping[str, str]) -> dict[str, float]:
        """A rolling restart of every process with ``env``: one console replica at a time (the
        other serves), then the reconciler, then the API."""
        out = {}
        for service in self.consoles:
            out[service.name] = round(self.restart_console(service, env), 2)
        out["reconciler"] = round(self.restart_reconciler(env), 2)
        out["api"] = round(self.restart_api(env), 2)
        return out


# --- Load ---------------------------------------------------------------------------------------


@dataclass
class Decision:
    task_id: str
    action: str
    first: str = ""  # "receipt", "stored" (sent later), or what else the page answered
    submission_id: str | None = None
    started: float = 0.0


@dataclass
class LoadTally:
    decisions: list[Decision] = field(default_factory=list)
    signed_out: list[str] = field(default_factory=list)  # "<person> at <seconds>"
    errors: list[str] = field(default_factory=list)  # what people saw that was not a page
    pages: int = 0


class Load:
    """One thread per signed-in person: each in turn walks a review or retry wizard to its end
    (on one replica, as the balancer gives them one per walk) and opens the work queue on
    another, until ``stop``."""

    def __init__(
        self, replicas: Replicas, people: list[Person], queue_id: str, *, pause: float = 0.2
    ) -> None:
        self.replicas, self.people, self.queue_id, self.pause = replicas, people, queue_id, pause
        self.tally = LoadTally()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.began = time.monotonic()

    def start(self) -> Load:
        for person in self.people:
            thread = threading.Thread(target=self._run, args=(person,), daemon=True)
            thread.start()
            self._threads.append(thread)
        return self

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=120)

    def _run(self, person: Person) -> None:
        from django.db import connection

        from tests.console.web import Console

        with self.replicas.balancer.replica() as url:
            console = Console(url).sign_in(person)  # type: ignore[arg-type]
        index = 0
        try:
            while not self._stop.is_set():
                index += 1
                self._one(console, person, "review" if index % 2 else "retry")
                time.sleep(self.pause)
        finally:
            console.close()
            connection.close()

    def _note(self, kind: str, text: str) -> None:
        with self._lock:
            getattr(self.tally, kind).append(f"{text} at {time.monotonic() - self.began:.1f}s")

    def _one(self, console: Any, person: Person, action: str) -> None:
        from tests.console.web import (
            retry_values,
            review_values,
            wizard_submit,
            wizard_to_confirm,
        )

        task_id = fresh_task(self.queue_id, action)
        decision = Decision(task_id, action, started=time.monotonic() - self.began)
        values = review_values() if action == "review" else retry_values()
        with self.replicas.balancer.replica() as url:
            console.http.base_url = url
            try:
                if self._signed_out(console, person, f"/tasks/{task_id}"):
                    return
                confirm = wizard_to_confirm(console, task_id, action, values)
                sent = wizard_submit(console, task_id, action, confirm.text)
            except (AssertionError, httpx.HTTPError) as error:
                self._note("errors", f"{person.username} {type(error).__name__}: {error!s:.120}")
                return
        if sent.status_code == 303 and (
            found := SUBMISSION_LINK.fullmatch(sent.headers["location"])
        ):
            decision.first, decision.submission_id = "receipt", found.group(1)
        else:
            decision.first = str(sent.status_code)
            if found := SUBMISSION_LINK.search(sent.text):
                decision.submission_id = found.group(1)
        with self._lock:
            self.tally.decisions.append(decision)
            self.tally.pages += 5
        with self.replicas.balancer.replica() as url:
            console.http.base_url = url
            with contextlib.suppress(httpx.HTTPError):
                self._signed_out(console, person, "/")

    def _signed_out(self, console: Any, person: Person, path: str) -> bool:
        """Open ``path``; when the console sends the person to sign in, note it, sign in again
        (as the person would) and say so."""
        page = console.get(path)
        if page.status_code in (302, 303) and SIGNIN.match(page.headers.get("location", "")):
            self._note("signed_out", f"{person.username} on {path}")
            console.http.cookies.clear()
            console.sign_in(person)
            return True
        return False


def settle(decisions: list[Decision]) -> dict[str, Any]:
    """Wait until every decision made is applied and its receipt held (or ``SETTLE_S``); then
    count: applied once, lost, duplicated, and those whose submission did not succeed."""
    from django.db import connection

    from orbit_console.decisions.models import Submission, SubmissionState
    from orbit_console.ledger.models import OperationAudit, Task

    deadline = time.monotonic() + SETTLE_S
    pending = list(decisions)
    while pending and time.monotonic() < deadline:
        pending = [
            d
            for d in pending
            if not (
                OperationAudit.objects.filter(task_id=d.task_id, action=f"task.{d.action}").exists()
                and Submission.objects.filter(
                    task_id=d.task_id, state=SubmissionState.SUCCEEDED
                ).exists()
            )
        ]
        time.sleep(0.5)
    time.sleep(0.5)
    verdicts: Counter[str] = Counter()
    not_succeeded = []
    for d in decisions:
        applied = OperationAudit.objects.filter(task_id=d.task_id, action=f"task.{d.action}")
        successors = Task.objects.filter(retry_of=d.task_id).count()
        count = applied.count()
        verdicts[
            "lost"
            if count == 0
            else "duplicated"
            if count > 1 or successors > 1
            else "applied once"
        ] += 1
        states = set(Submission.objects.filter(task_id=d.task_id).values_list("state", flat=True))
        if SubmissionState.SUCCEEDED not in states:
            not_succeeded.append(f"{d.task_id} {d.action}: {sorted(states)}")
    connection.close()
    return {
        "decisions": len(decisions),
        "applied_once": verdicts["applied once"],
        "lost": verdicts["lost"],
        "duplicated": verdicts["duplicated"],
        "first_answers": dict(Counter(d.first for d in decisions)),
        "not_succeeded": not_succeeded,
    }


def run_manage(env: Mapping[str, str], *args: str) -> tuple[int, str]:
    """``manage.py <args>`` as its own process with ``env``; its exit status and output."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr
