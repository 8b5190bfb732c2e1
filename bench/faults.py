"""The fault suite (issue 14): real processes, real faults, and every decision counted.

    uv run python bench/faults.py [--database-url mysql://root@127.0.0.1:3306/orbit_bench_faults]
        [--redis-url redis://127.0.0.1:6379/13] [--trials 20] [--only SCENARIO ...] [--seed 14]

The rig (``Rig``), each part its own process as in production:

- the recovery API: a worker of the production shape (the embedded ledger);
- the console: another worker, whose calls to the API go through a ``FaultyProxy``
  (``ORBIT_EMBEDDED_API_URL``), which can refuse them, lose answers, or kill a process at an
  exact point of a write;
- the reconciler: ``manage.py reconcile`` with its health port;
- a ``TcpProxy`` in front of the database (MySQL/MariaDB) and one in front of Redis, which
  refuse, hang or cut connections; the three processes reach both only through them, the
  database as a user with the runtime grants of ``deploy/mysql/grants.sql``;
- the observer (this process), on the database directly: it makes the tasks and counts what
  was applied.

Each trial makes a fresh task — in NEEDS_REVIEW for a review, FAILED for a retry, alternately —
and an operator, signed in over HTTP, walks the wizard to its confirm step. The scenario
injects its fault and the operator confirms; the fault ends (a killed process is started again
at once, as the demo's supervisor and compose's restart policy do); the operator then does
what the page told them: follows the receipt or the "your decision was stored" link, or, if
the page said nothing was stored (or the connection broke), opens the task page, follows the
decision listed there, or confirms again if there is none. Nobody restarts or repairs anything
else. The trial ends when the API holds the decision and the console its receipt (or after
``DEADLINE`` seconds), and counts:

- applied once: exactly one ``task.review``/``task.retry`` audit record for the task and, for
  a retry, exactly one successor task;
- lost: none (the decision never reached the API);
- duplicated: more than one (or more than one successor);
- told: the operator's submission page shows the API's receipt at the end;
- recovery: seconds from the fault's end until the console holds the receipt.

The suite runs with short settings so that trials take seconds, not minutes (``RIG_ENV``):
those bound the recovery time, and docs/reliability.md states the bound with the defaults.
Results: stdout and ``var/bench/faults.json``; written up in docs/reliability.md.
``tests/ops/test_faults.py`` runs a few scenarios of the same rig in the suite.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script (the suite imports it as bench.faults)
    sys.path.insert(0, str(ROOT))

from tests.support.proxy import FaultyProxy, TcpProxy, WriteFault  # noqa: E402

DEADLINE = 90.0  # seconds a trial waits for the decision to settle
OUTAGE = 1.0  # seconds an outage lasts after the operator confirmed
HANG = 6.0  # seconds a hung database stays hung: longer than the read timeout below
# The processes' database user: this run's own, so that two runs on one server never drop or
# re-grant each other's (issue 41).
RIG_USER = f"orbit_faults_{secrets.token_hex(4)}"
RIG_ENV = {
    "CONSOLE_REVIEW_APPROVAL": "off",  # operators send directly: no four-eyes step in the way
    "CONSOLE_RETRY_APPROVAL": "off",
    "CONSOLE_PENDING_GRACE_SECONDS": "3",  # default 30: a decision a crash left unsent
    "DATABASE_CONNECT_TIMEOUT_SECONDS": "2",  # default 5
    "DATABASE_READ_TIMEOUT_SECONDS": "4",  # default 30
    "LOG_LEVEL": "WARNING",
}
RECONCILER_INTERVAL = "0.5"  # default 2 seconds between passes
SUBMISSION_LINK = re.compile(r"/submissions/([0-9a-f]{32})")


# --- Processes ----------------------------------------------------------------------------------


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Service:
    """One process of the rig on a fixed port; ``kill`` is SIGKILL (no goodbye), ``start``
    waits until its ``/health/live`` answers."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], port: int, logs: Path):
        self.name, self.argv, self.env, self.port = name, argv, env, port
        self.log_path = logs / f"faults-{name}.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        """Start the process; the moment it answers (monotonic)."""
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited ({self.process.returncode}); see logs")
            with contextlib.suppress(httpx.TransportError):
                live = httpx.get(f"http://127.0.0.1:{self.port}/health/live", timeout=1)
                if live.status_code == 200:
                    return time.monotonic()
            time.sleep(0.05)
        raise RuntimeError(f"{self.name} did not come up; see {self.log_path}")

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
            self.process.wait()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def stop(self) -> None:
        if self.alive:
            assert self.process is not None
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.kill()


def _with_address(url: str, port: int, *, user: str | None = None, password: str = "") -> str:
    """``url`` pointed at 127.0.0.1:``port`` (the proxy), as ``user`` if given."""
    parts = urlsplit(url)
    credentials = parts.netloc.rpartition("@")[0] if "@" in parts.netloc else ""
    if user is not None:
        credentials = f"{user}:{password}" if password else user
    netloc = f"{credentials + '@' if credentials else ''}127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


# --- The rig ------------------------------------------------------------------------------------


@dataclass
class Person:
    username: str
    password: str
    user_id: int


class Rig:
    """The API, the console and the reconciler, with proxies in front of the API, the database
    and Redis. ``database_url`` is the real database (already migrated and seeded; the observer
    is on it); ``env`` the environment the processes start from."""

    def __init__(
        self,
        *,
        database_url: str,
        redis_url: str | None,
        env: dict[str, str],
        logs: Path,
        rig_password: str | None = None,
    ) -> None:
        self.db_proxy: TcpProxy | None = None
        self.redis_proxy: TcpProxy | None = None
        self.mysql = database_url.startswith("mysql")
        served_database = database_url
        if self.mysql:
            real = urlsplit(database_url)
            self.db_proxy = TcpProxy((real.hostname or "127.0.0.1", real.port or 3306))
            served_database = _with_address(
                database_url, self.db_proxy.port, user=RIG_USER, password=rig_password or ""
            )
        served_redis = ""
        if redis_url:
            real = urlsplit(redis_url)
            self.redis_proxy = TcpProxy((real.hostname or "127.0.0.1", real.port or 6379))
            served_redis = _with_address(redis_url, self.redis_proxy.port)
        logs.mkdir(parents=True, exist_ok=True)
        base = {**env, **RIG_ENV, "DATABASE_URL": served_database, "REDIS_URL": served_redis}
        base.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        if not served_redis:
            base.pop("REDIS_URL")
        api_port = free_port()
        self.api = Service("api", _worker(api_port), base, api_port, logs)
        self.api_proxy = FaultyProxy(upstream_port=api_port)
        through_proxy = {**base, "ORBIT_EMBEDDED_API_URL": self.api_proxy.url}
        console_port = free_port()
        self.console = Service("console", _worker(console_port), through_proxy, console_port, logs)
        reconciler_port = free_port()
        reconcile = [sys.executable, "manage.py", "reconcile", "--interval", RECONCILER_INTERVAL]
        self.reconciler = Service(
            "reconciler",
            [*reconcile, "--health-port", str(reconciler_port)],
            through_proxy,
            reconciler_port,
            logs,
        )
        self.services = (self.api, self.console, self.reconciler)

    @property
    def console_url(self) -> str:
        return f"http://127.0.0.1:{self.console.port}"

    def start(self) -> Rig:
        for service in self.services:
            service.start()
        return self

    def stop(self) -> None:
        for service in self.services:
            service.stop()
        for proxy in (self.api_proxy, self.db_proxy, self.redis_proxy):
            if proxy is not None:
                proxy.close()

    def revive(self) -> None:
        """Between trials: every proxy passing, every process up (a scenario's leftovers)."""
        self.api_proxy.set_mode("pass")
        self.api_proxy.arm(None)
        for proxy in (self.db_proxy, self.redis_proxy):
            if proxy is not None:
                proxy.set_mode("pass")
        for service in self.services:
            if not service.alive:
                service.start()


def _worker(port: int) -> list[str]:
    """One worker of the production shape (uvicorn unless ORBIT_SERVER=daphne)."""
    from orbit_console.ops.workers import default_server, worker_argv

    return worker_argv(default_server(), host="127.0.0.1", port=port)


def create_rig_user(password: str) -> None:
    """The processes' database user: the runtime grants of deploy/mysql/grants.sql (rows only),
    so that the grants can be taken away and given back (``db_grants_revoked``)."""
    from django.db import connection

    database = connection.settings_dict["NAME"]
    with connection.cursor() as cursor:
        cursor.execute(f"DROP USER IF EXISTS '{RIG_USER}'@'%'")
        cursor.execute(f"CREATE USER '{RIG_USER}'@'%%' IDENTIFIED BY %s", [password])
        cursor.execute(f"GRANT {RUNTIME_PRIVILEGES} ON `{database}`.* TO '{RIG_USER}'@'%'")


RUNTIME_PRIVILEGES = "SELECT, INSERT, UPDATE, DELETE"


def drop_rig_user() -> None:
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(f"DROP USER IF EXISTS '{RIG_USER}'@'%'")


def set_rig_writes(allowed: bool) -> None:
    """Give the rig's user its write privileges back, or take them away."""
    from django.db import connection

    database = connection.settings_dict["NAME"]
    verb, direction = ("GRANT", "TO") if allowed else ("REVOKE", "FROM")
    with connection.cursor() as cursor:
        cursor.execute(
            f"{verb} INSERT, UPDATE, DELETE ON `{database}`.* {direction} '{RIG_USER}'@'%'"
        )


# --- The world ----------------------------------------------------------------------------------


def make_operator(namespace_id: str, name: str) -> Person:
    from django.contrib.auth.models import User

    from orbit_console.people.credentials import person_enroll

    password = secrets.token_urlsafe(12)
    user = User.objects.create_user(username=name, password=password)
    person_enroll(user=user, roles=frozenset({"operator"}), namespace_id=namespace_id)
    return Person(username=name, password=password, user_id=user.pk)


def fresh_task(queue_id: str, action: str) -> str:
    """A task to decide on: parked in NEEDS_REVIEW (a review) or FAILED (a retry), at
    revision 3, with room in the queue for it (and for a retry's successor)."""
    from django.db import transaction
    from django.db.models import F

    from orbit_console.ledger import lifecycle
    from orbit_console.ledger.models import Application, AttemptOutcome, Queue

    with transaction.atomic():
        Queue.objects.filter(id=queue_id).update(capacity=F("capacity") + 2)
        queue = Queue.objects.get(id=queue_id)
        Application.objects.filter(namespace_id=queue.namespace_id).update(quota=F("quota") + 2)
        submitter = lifecycle.actor_id_for(queue.namespace_id, "submitter")
        worker = lifecycle.actor_id_for(queue.namespace_id, "fault-worker")
        task = lifecycle.task_accept(
            queue=queue,
            actor_id=submitter,
            handler="object.prepare",
            payload='{"object_ref":"objects/faults"}',
            business_key=f"faults:{secrets.token_hex(6)}",
            retry=lifecycle.RetryPolicy(max_attempts=1, attempt_timeout_ms=10_000),
        )
        lifecycle.attempt_start(task=task, worker_id="fault-worker")
        outcome = AttemptOutcome.UNKNOWN if action == "review" else AttemptOutcome.FAILED
        lifecycle.attempt_finish(task=task, worker_actor_id=worker, outcome=outcome, error="x")
    return task.id


# --- One trial ----------------------------------------------------------------------------------


@dataclass
class Sent:
    """What the operator's browser got for pressing confirm."""

    response: httpx.Response | None
    error: str = ""

    @property
    def submission_id(self) -> str | None:
        """The decision the page leads to: the receipt's redirect, or the fault page's "your
        decision was stored" link."""
        if self.response is None:
            return None
        if self.response.status_code == 303:
            found = SUBMISSION_LINK.fullmatch(self.response.headers.get("location", ""))
        else:
            found = SUBMISSION_LINK.search(self.response.text)
        return found.group(1) if found else None


@dataclass
class Walk:
    """One operator at the confirm step of one task's wizard."""

    console: Any  # tests.console.web.Console
    task_id: str
    action: str
    confirm_html: str = ""

    def to_confirm(self) -> Walk:
        from tests.console.web import retry_values, review_values, wizard_to_confirm

        values = review_values() if self.action == "review" else retry_values()
        self.confirm_html = wizard_to_confirm(self.console, self.task_id, self.action, values).text
        return self

    def confirm(self) -> Sent:
        from tests.console.web import wizard_submit

        try:
            return Sent(wizard_submit(self.console, self.task_id, self.action, self.confirm_html))
        except httpx.HTTPError as error:
            return Sent(None, error=type(error).__name__)

    def follow_up(self, sent: Sent) -> str | None:
        """After the fault, what a person does: the page's link; else the decision the task
        page lists; else confirm again."""
        if sent.submission_id:
            return sent.submission_id
        with contextlib.suppress(httpx.HTTPError):
            page = self.console.get(f"/tasks/{self.task_id}")
            if page.status_code == 200 and (listed := SUBMISSION_LINK.search(page.text)):
                return listed.group(1)
        return self.confirm().submission_id


@dataclass
class Trial:
    scenario: str
    index: int
    action: str
    task_id: str = ""
    applied: int = 0
    successors: int = 0
    submissions: int = 0
    told: bool = False
    first_answer: str = ""
    recovery_s: float | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def verdict(self) -> str:
        if self.applied == 0:
            return "lost"
        if self.applied > 1 or self.successors > 1:
            return "duplicated"
        return "applied once"


Inject = Callable[["Rig", list["Recorder"], "Trial", random.Random], float]


@dataclass(frozen=True)
class Scenario:
    name: str
    what: str
    inject: Inject  # injects the fault, has the operator confirm; returns when the fault ended
    needs: frozenset[str] = frozenset()  # "mysql", "redis"
    two_people: bool = False


def _first_answer(sent: Sent) -> str:
    if sent.response is None:
        return f"connection lost ({sent.error})"
    if sent.response.status_code == 303 and not sent.submission_id:
        return f"303 to {sent.response.headers.get('location')}"
    return str(sent.response.status_code)


def run_trial(
    rig: Rig,
    scenario: Scenario,
    index: int,
    consoles: Sequence[Any],
    queue_id: str,
    rng: random.Random,
) -> Trial:
    from orbit_console.decisions.models import Submission, SubmissionState
    from orbit_console.ledger.models import OperationAudit, Task

    action = "review" if index % 2 == 0 else "retry"
    trial = Trial(scenario.name, index, action)
    rig.revive()
    trial.task_id = fresh_task(queue_id, action)
    walks = [Walk(console, trial.task_id, action).to_confirm() for console in consoles]
    people = [Recorder(walk) for walk in walks]
    healed = scenario.inject(rig, people, trial, rng)
    trial.first_answer = " / ".join(_first_answer(person.first) for person in people)
    rig.revive()
    submission_id = walks[0].follow_up(people[0].first)
    for person in people[1:]:
        person.walk.follow_up(person.first)
    audit_action = f"task.{action}"
    deadline = time.monotonic() + DEADLINE
    look_again = time.monotonic() + 2
    while time.monotonic() < deadline:
        applied = OperationAudit.objects.filter(task_id=trial.task_id, action=audit_action)
        receipts = Submission.objects.filter(task_id=trial.task_id, state=SubmissionState.SUCCEEDED)
        if applied.exists() and receipts.exists():
            trial.recovery_s = round(max(0.0, time.monotonic() - healed), 2)
            break
        if submission_id is None and time.monotonic() >= look_again:
            submission_id = walks[0].follow_up(Sent(None))  # a person looks again
            look_again = time.monotonic() + 2
        time.sleep(0.05)
    time.sleep(0.2)  # anything late and doubled would land now
    trial.applied = OperationAudit.objects.filter(
        task_id=trial.task_id, action=audit_action
    ).count()
    trial.successors = Task.objects.filter(retry_of=trial.task_id).count()
    trial.submissions = Submission.objects.filter(task_id=trial.task_id).count()
    if submission_id is not None:
        page = walks[0].console.get(f"/submissions/{submission_id}")
        trial.told = page.status_code == 200 and 'id="receipt-audit-id"' in page.text
    return trial


class Recorder:
    """A person's walk as a scenario drives it: it keeps what their first confirm got."""

    def __init__(self, walk: Walk) -> None:
        self.walk = walk
        self.sent: list[Sent] = []

    def confirm(self) -> Sent:
        answer = self.walk.confirm()
        self.sent.append(answer)
        return answer

    @property
    def first(self) -> Sent:
        return self.sent[0] if self.sent else Sent(None, error="never confirmed")


# --- The scenarios ------------------------------------------------------------------------------


def _later(delay: float, action: Callable[[], object]) -> threading.Timer:
    timer = threading.Timer(delay, action)
    timer.start()
    return timer


def api_down(rig: Rig, people: list[Recorder], trial: Trial, rng: random.Random) -> float:
    walk = people[0]
    rig.api_proxy.set_mode("down")
    walk.confirm()
    time.sleep(OUTAGE)
    rig.api_proxy.set_mode("pass")
    return time.monotonic()


def _api_killed(*, after_commit: bool) -> Inject:
    """The API killed (SIGKILL) as the write arrives, or once it has committed and before its
    answer leaves; started again at once."""

    def inject(rig: Rig, people: list[Recorder], trial: Trial, rng: random.Random) -> float:
        kill = rig.api.kill
        if after_commit:
            rig.api_proxy.arm(WriteFault(after=kill, answer=False))
        else:
            rig.api_proxy.arm(WriteFault(before=kill, forward=False))
        people[0].confirm()
        return rig.api.start()

    return inject


def api_answer_lost(rig: Rig, people: list[Recorder], trial: Trial, rng: random.Random) -> float:
    walk = people[0]
    rig.api_proxy.arm(WriteFault(answer=False))
    walk.confirm()
    return time.monotonic()


def console_killed_mid_send(
    rig: Rig, people: list[Recorder], trial: Trial, rng: random.Random
) -> float:
    """The console dies with its request on the wire; every other trial the API gets it."""
    walk = people[0]
    rig.api_proxy.arm(WriteFault(before=rig.console.kill, forward=trial.index % 4 < 2))
    walk.confirm()
    return rig.console.start()


def reconciler_killed(rig: Rig, people: list[Recorder], trial: Trial, rng: random.Random) -> float:
    """The answer to the console is lost, and the reconciler dies in the middle of sending it
    again (every other trial after the API got it)."""
    walk = people[0]
    rig.api_proxy.arm(WriteFault(answer=False))
    walk.confirm()
    rig.api_proxy.arm(WriteFault(before=rig.reconciler.kill, forward=trial.index % 4 < 2))
    deadline = time.monotonic() + 30
    while rig.reconciler.alive and time.monotonic() < deadline:
        time.sleep(0.02)
    if rig.reconciler.alive:
        trial.notes.append("the reconciler never resent")
        return time.monotonic()
    return rig.reconciler.start()


def _database_fault(mode: str, hold: float) -> Inject:
    def inject(rig: Rig, people: list[Recorder], trial: Trial, rng: random.Random) -> float:
        walk = people[0]
        proxy = rig.db_proxy
        assert proxy is not None

        def fault() -> None:
            proxy.set_mode(mode)
            if mode == "refuse":
                proxy.cut()

        # The fault lands somewhere in the confirm's work: before the decision is stored,
        # between storing and sending, while the API applies it, or as the receipt is kept.
        timer = _later(rng.uniform(0, 0.06), fault)
        walk.confirm()
        timer.join()
        time.sleep(hold)
        proxy.set_mode("pass")
        return time.monotonic()

    return inject


def db_cut_after_api_applied(
    rig: Rig, people: list[Recorder], trial: Trial, rng: random.Random
) -> float:
    walk = people[0]
    proxy = rig.db_proxy
    assert proxy is not None

    def cut() -> None:
        proxy.set_mode("refuse")
        proxy.cut()

    rig.api_proxy.arm(WriteFault(after=cut))
    walk.confirm()
    time.sleep(OUTAGE)
    proxy.set_mode("pass")
    return time.monotonic()


def db_grants_revoked(rig: Rig, people: list[Recorder], trial: Trial, rng: random.Random) -> float:
    """Someone takes the write privileges away (and the connections are recycled, as a
    failover or a restart of the database does), then gives them back."""
    walk = people[0]
    assert rig.db_proxy is not None
    set_rig_writes(False)
    rig.db_proxy.cut()
    try:
        walk.confirm()
        time.sleep(OUTAGE)
    finally:
        set_rig_writes(True)
    return time.monotonic()


def _redis_fault(mode: str) -> Inject:
    def inject(rig: Rig, people: list[Recorder], trial: Trial, rng: random.Random) -> float:
        walk = people[0]
        proxy = rig.redis_proxy
        assert proxy is not None
        proxy.set_mode(mode)
        if mode == "refuse":
            proxy.cut()
        walk.confirm()
        time.sleep(OUTAGE)
        proxy.set_mode("pass")
        return time.monotonic()

    return inject


def double_submit(rig: Rig, people: list[Recorder], trial: Trial, rng: random.Random) -> float:
    """Two operators, each at the confirm step of the same task at the same revision, press
    confirm at the same moment."""
    together = threading.Barrier(len(people))

    def press(person: Recorder) -> None:
        together.wait()
        person.confirm()

    threads = [threading.Thread(target=press, args=(person,)) for person in people]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.monotonic()


SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario("api_down", "the API unreachable for 1 s", api_down),
        Scenario(
            "api_killed_before_commit",
            "the API killed as the write arrives",
            _api_killed(after_commit=False),
        ),
        Scenario(
            "api_killed_after_commit",
            "the API killed after it committed, before its answer left",
            _api_killed(after_commit=True),
        ),
        Scenario("api_answer_lost", "the API's answer lost on the way back", api_answer_lost),
        Scenario(
            "db_refused",
            "the database refuses connections (and cuts the open ones) for 1 s",
            _database_fault("refuse", OUTAGE),
            needs=frozenset({"mysql"}),
        ),
        Scenario(
            "db_hung",
            f"the database stops answering for {HANG:.0f} s",
            _database_fault("hang", HANG),
            needs=frozenset({"mysql"}),
        ),
        Scenario(
            "db_cut_after_api_applied",
            "every database connection cut once the API has applied the decision",
            db_cut_after_api_applied,
            needs=frozenset({"mysql"}),
        ),
        Scenario(
            "db_grants_revoked",
            "the write privileges revoked for 1 s",
            db_grants_revoked,
            needs=frozenset({"mysql"}),
        ),
        Scenario(
            "redis_killed",
            "Redis down for 1 s",
            _redis_fault("refuse"),
            needs=frozenset({"redis"}),
        ),
        Scenario(
            "redis_hung",
            "Redis stops answering for 1 s",
            _redis_fault("hang"),
            needs=frozenset({"redis"}),
        ),
        Scenario(
            "reconciler_killed",
            "the reconciler killed while it sends a decision again",
            reconciler_killed,
        ),
        Scenario(
            "console_killed_mid_send",
            "the console killed with the decision on its way to the API",
            console_killed_mid_send,
        ),
        Scenario(
            "double_submit",
            "two operators confirm the same task at once",
            double_submit,
            two_people=True,
        ),
    )
}


# --- Tallies and the command --------------------------------------------------------------------


def tally(trials: Sequence[Trial]) -> dict[str, Any]:
    recovered = [trial.recovery_s for trial in trials if trial.recovery_s is not None]
    verdicts = [trial.verdict for trial in trials]
    return {
        "trials": len(trials),
        "applied_once": verdicts.count("applied once"),
        "lost": verdicts.count("lost"),
        "duplicated": verdicts.count("duplicated"),
        "told": sum(trial.told for trial in trials),
        "recovered": len(recovered),
        "recovery_p50_s": sorted(recovered)[len(recovered) // 2] if recovered else None,
        "recovery_max_s": max(recovered) if recovered else None,
        "first_answers": dict(Counter(trial.first_answer for trial in trials)),
    }


def scenarios_for(*, mysql: bool, redis: bool) -> list[Scenario]:
    """The scenarios this rig can run: the database ones need MySQL/MariaDB, Redis's Redis."""
    have = {"mysql"} if mysql else set()
    if redis:
        have.add("redis")
    return [scenario for scenario in SCENARIOS.values() if scenario.needs <= have]


@contextlib.contextmanager
def signed_in_people(rig: Rig, people: Sequence[Person]) -> Iterator[list[Any]]:
    from tests.console.web import signed_in

    consoles = [signed_in(rig.console_url, person) for person in people]  # type: ignore[arg-type]
    try:
        yield consoles
    finally:
        for console in consoles:
            console.close()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        default="mysql://root@127.0.0.1:3306/orbit_bench_faults",
        help="MySQL/MariaDB; the name must contain 'bench' (it is dropped and made again)",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--trials", type=int, default=20, help="trials per scenario")
    parser.add_argument("--only", nargs="*", choices=sorted(SCENARIOS), default=None)
    parser.add_argument("--seed", type=int, default=14)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    from support import BENCH_DIR, fresh_database, loadavg, machine, manage, setup_django

    if not args.database_url.startswith("mysql"):
        raise SystemExit("the database faults need MySQL/MariaDB (a TCP proxy in front of it)")
    database_url = fresh_database(args.database_url, "unused.sqlite3")
    manage(database_url, "migrate", "--verbosity", "0")
    seeded = json.loads(manage(database_url, "orbit", "seed"))
    os.environ.update(RIG_ENV)  # the operators' credentials may send directly, as in the rig
    setup_django(database_url)
    from django.db import connections

    rig_password = secrets.token_urlsafe(16)
    create_rig_user(rig_password)
    people = [make_operator(seeded["namespace_id"], f"fault-operator-{n}") for n in "ab"]
    connections.close_all()
    env = {key: value for key, value in os.environ.items() if key != "DATABASE_URL"}
    rig = Rig(
        database_url=database_url,
        redis_url=args.redis_url,
        env=env,
        logs=BENCH_DIR,
        rig_password=rig_password,
    )
    chosen = [
        scenario
        for scenario in scenarios_for(mysql=True, redis=bool(args.redis_url))
        if args.only is None or scenario.name in args.only
    ]
    rng = random.Random(args.seed)
    results: dict[str, Any] = {"machine": machine(), "load_before": loadavg(), "env": RIG_ENV}
    trials: dict[str, list[Trial]] = {}
    began = time.monotonic()
    try:
        rig.start()
        with signed_in_people(rig, people) as consoles:
            for scenario in chosen:
                for index in range(args.trials):
                    who = consoles if scenario.two_people else consoles[:1]
                    trial = run_trial(rig, scenario, index, who, seeded["queue_id"], rng)
                    trials.setdefault(scenario.name, []).append(trial)
                    print(
                        f"{scenario.name:<26} #{index:<3} {trial.action:<6} {trial.verdict:<12} "
                        f"told={trial.told!s:<5} recovery={trial.recovery_s}s "
                        f"first={trial.first_answer} {' '.join(trial.notes)}",
                        flush=True,
                    )
    finally:
        rig.stop()
        drop_rig_user()
    results["seconds"] = round(time.monotonic() - began)
    results["load_after"] = loadavg()
    results["scenarios"] = {
        name: {"what": SCENARIOS[name].what, **tally(done)} for name, done in trials.items()
    }
    results["trials"] = {name: [vars(trial) for trial in done] for name, done in trials.items()}
    everything = [trial for done in trials.values() for trial in done]
    results["total"] = tally(everything)
    (BENCH_DIR / "faults.json").write_text(json.dumps(results, indent=2))
    print(f"\nload before/after: {results['load_before']} / {results['load_after']}")
    print("| Scenario | Trials | Applied once | Lost | Duplicated | Told | Recovery p50 / max |")
    for name, row in [*results["scenarios"].items(), ("all", results["total"])]:
        print(
            f"| {name} | {row['trials']} | {row['applied_once']} | {row['lost']} | "
            f"{row['duplicated']} | {row['told']} | {row['recovery_p50_s']} s / "
            f"{row['recovery_max_s']} s |"
        )


if __name__ == "__main__":
    sys.exit(main())
