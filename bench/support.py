"""What the benchmarks share: the machine, a fresh database, Django, a served console, signing in.

The scripts are run as ``uv run python bench/<script>.py`` from the repository root, so this
directory is the first entry of ``sys.path`` and they ``import support`` as a top-level module;
the project itself is put on the path by ``setup_django`` (and the subprocesses run in ``ROOT``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Self

import httpx

ROOT = Path(__file__).resolve().parent.parent
BENCH_DIR = ROOT / "var" / "bench"
CSRF_INPUT = re.compile(r'name="csrfmiddlewaretoken" value="([^"]+)"')


# --- Machine ------------------------------------------------------------------------------------


def loadavg() -> str:
    """The 1, 5 and 15 minute load averages."""
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def machine() -> dict[str, Any]:
    model = ""
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            model = line.split(":", 1)[1].strip()
            break
    mem_kib = int(Path("/proc/meminfo").read_text().split()[1])
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "python": platform.python_version(),
        "kernel": platform.release(),
    }


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


# --- Statistics and processes ------------------------------------------------------------------


def percentile(values: Sequence[float], fraction: float) -> float:
    """Nearest-rank percentile (with few values the high ones are simply the maximum)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), int(-(-fraction * len(ordered) // 1))))
    return ordered[rank - 1]


def summary(values: Sequence[float | None]) -> dict[str, Any]:
    present = [value for value in values if value is not None]
    missing = len(values) - len(present)
    if not present:
        return {"count": 0, "lost": missing}
    return {
        "count": len(present),
        "lost": missing,
        "p50": round(percentile(present, 0.50), 2),
        "p95": round(percentile(present, 0.95), 2),
        "p99": round(percentile(present, 0.99), 2),
        "max": round(max(present), 2),
    }


def process_cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (and its waited-for children), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(value) for value in fields[11:15])
    return ticks / os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """The living processes below ``pid`` (its workers), from /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def database_pid() -> int | None:
    """The local MariaDB/MySQL server's process, when there is one (its CPU is reported)."""
    for stat in Path("/proc").glob("[0-9]*/comm"):
        try:
            if stat.read_text().strip() in ("mariadbd", "mysqld"):
                return int(stat.parent.name)
        except OSError:
            continue
    return None


def database_statements(database_url: str) -> dict[str, int] | None:
    """The MySQL/MariaDB server's statement counters (``SHOW GLOBAL STATUS``): before and after
    a run, how many round trips it made. ``None`` on SQLite."""
    if not database_url.startswith("mysql"):
        return None
    names = ("Questions", "Com_select", "Com_insert", "Com_update", "Com_commit", "Com_set_option")
    server = mysql_connect(database_url)
    try:
        cursor = server.cursor()
        cursor.execute("SHOW GLOBAL STATUS WHERE Variable_name IN %s", [names])
        return {name: int(value) for name, value in cursor.fetchall()}
    finally:
        server.close()


class CpuMeter:
    """The CPU used meanwhile by the server's processes, this load generator and the local
    database server: where the machine's cores went."""

    def __init__(self, server_pid: int) -> None:
        self.pids = {"server": server_pid, "client": os.getpid(), "database": database_pid()}
        self.start = self._now()
        self.began = time.monotonic()

    def _now(self) -> dict[str, float]:
        used = {}
        for name, pid in self.pids.items():
            if pid is None:
                continue
            with contextlib.suppress(OSError):
                used[name] = tree_cpu_seconds(pid) if name == "server" else process_cpu_seconds(pid)
        return used

    def percent(self) -> dict[str, float]:
        wall = time.monotonic() - self.began
        now = self._now()
        return {
            f"{name}_cpu_pct": round(100 * (now[name] - self.start[name]) / wall, 1)
            for name in now
            if name in self.start
        }


def tree_cpu_seconds(pid: int) -> float:
    """CPU time of ``pid`` and of every living process below it."""
    total = 0.0
    for member in [pid, *descendants(pid)]:
        # One that exited meanwhile counts in its parent's waited-for children.
        with contextlib.suppress(OSError):
            total += process_cpu_seconds(member)
    return total


# --- Database and Django ------------------------------------------------------------------------


def mysql_connect(database_url: str, *, database: bool = True, **options: Any) -> Any:
    """A MySQLdb connection to the server of ``database_url`` (to its database, by default)."""
    import dj_database_url
    import MySQLdb

    config = dj_database_url.parse(database_url)
    if database:
        options["database"] = str(config["NAME"])
    return MySQLdb.connect(
        host=str(config.get("HOST") or "127.0.0.1"),
        port=int(config.get("PORT") or 3306),
        user=str(config.get("USER") or "root"),
        password=str(config.get("PASSWORD") or ""),
        **options,
    )


def fresh_database(database_url: str | None, sqlite_name: str) -> str:
    """A new, empty database; returns its DATABASE_URL.

    Without ``database_url`` (or with an SQLite one): the file ``sqlite_name`` under
    ``var/bench/``, removed with its WAL files. Otherwise the MySQL/MariaDB database it names,
    dropped and created again; its name must contain "bench".
    """
    BENCH_DIR.mkdir(parents=True, exist_ok=True)
    if not database_url or database_url.startswith("sqlite"):
        path = BENCH_DIR / sqlite_name
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path}"
    import dj_database_url

    name = str(dj_database_url.parse(database_url)["NAME"])
    if not re.fullmatch(r"[A-Za-z0-9_]+", name) or "bench" not in name:
        raise SystemExit(f"refusing to drop {name!r}: the database name must contain 'bench'")
    server = mysql_connect(database_url, database=False)
    try:
        cursor = server.cursor()
        cursor.execute(f"DROP DATABASE IF EXISTS `{name}`")
        cursor.execute(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    finally:
        server.close()
    return database_url


def server_env(database_url: str, **extra: str) -> dict[str, str]:
    """This process's environment for a child on ``database_url``, plus ``extra``; without
    ``REDIS_URL``, ``ORBIT_API_URL`` and ``DJANGO_ALLOW_ASYNC_UNSAFE`` unless ``extra`` sets
    them."""
    env = {**os.environ, "DATABASE_URL": database_url, **extra}
    for name in ("REDIS_URL", "ORBIT_API_URL", "DJANGO_ALLOW_ASYNC_UNSAFE"):
        if name not in extra:
            env.pop(name, None)
    return env


def manage(database_url: str, *args: str, env: Mapping[str, str] | None = None) -> str:
    """``manage.py <args>`` in its own process, with ``env`` added to ``server_env``; its stdout
    (exits the script if it fails)."""
    done = subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=server_env(database_url, **(env or {})),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"manage.py {' '.join(args)} failed:\n{done.stderr}")
    return done.stdout


def setup_django(database_url: str, *, redis_url: str = "") -> None:
    """Django set up in this process, on ``database_url`` (and Redis's channel layer with
    ``redis_url``)."""
    os.environ["DATABASE_URL"] = database_url  # before django.setup(): settings read it
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orbit_console.settings")
    if redis_url:
        os.environ["REDIS_URL"] = redis_url
    else:
        os.environ.pop("REDIS_URL", None)
    os.environ.pop("ORBIT_API_URL", None)
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()


def needs_review_tasks(
    seeded: dict[str, Any], count: int, *, key_prefix: str = "bench"
) -> list[str]:
    """``count`` new tasks in NEEDS_REVIEW at revision 3 (accepted, started, finished with an
    unknown outcome) in the queue that ``orbit seed`` made; their ids. Django must be set up."""
    from django.db import transaction
    from django.db.models import F

    from orbit_console.ledger.lifecycle import (
        RetryPolicy,
        actor_id_for,
        attempt_finish,
        attempt_start,
        task_accept,
    )
    from orbit_console.ledger.models import Application, AttemptOutcome, Queue

    namespace_id = seeded["namespace_id"]
    submitter = actor_id_for(namespace_id, "submitter")
    worker = actor_id_for(namespace_id, "bench-worker")
    task_ids: list[str] = []
    with transaction.atomic():
        queue = Queue.objects.get(id=seeded["queue_id"])
        # Room for them all: tasks in NEEDS_REVIEW hold quota (RT7).
        Queue.objects.filter(id=queue.id).update(capacity=F("capacity") + count)
        Application.objects.filter(namespace_id=namespace_id).update(quota=F("quota") + count)
        for index in range(count):
            task = task_accept(
                queue=queue,
                actor_id=submitter,
                handler="object.prepare",
                payload='{"object_ref":"objects/bench"}',
                business_key=f"{key_prefix}:{index}",
                retry=RetryPolicy(max_attempts=1, attempt_timeout_ms=10_000),
            )
            attempt_start(task=task, worker_id="bench-worker")
            task = attempt_finish(
                task=task, worker_actor_id=worker, outcome=AttemptOutcome.UNKNOWN, error="lost"
            )
            task_ids.append(task.id)
    return task_ids


# --- The server ---------------------------------------------------------------------------------


def worker_argv(port: int, *, application: str, server: str | None = None) -> list[str]:
    """One worker of the production shape (``ops/workers.worker_argv``: uvicorn unless
    ``ORBIT_SERVER`` or ``server`` says daphne) on 127.0.0.1:``port``."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from orbit_console.ops import workers

    chosen = server or workers.default_server()
    return workers.worker_argv(chosen, host="127.0.0.1", port=port, application=application)


class WorkerProcess:
    """One worker process of the production shape (``worker_argv``) serving ``application``
    on a free local port of 127.0.0.1, with the embedded recovery API in the same process (as
    production runs it) and ``extra_env`` added to ``server_env``. Its output goes to
    ``log_path`` (appended to, or written anew)."""

    def __init__(
        self,
        database_url: str,
        *,
        log_path: Path,
        application: str = "orbit_console.asgi:application",
        extra_env: Mapping[str, str] | None = None,
        append_log: bool = False,
        start_timeout: float = 60,
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.application = application
        self.env = server_env(database_url, **(extra_env or {}))
        self.log_path = log_path
        self.append_log = append_log
        self.start_timeout = start_timeout
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def command(self) -> list[str]:
        return worker_argv(self.port, application=self.application)

    def start(self) -> Self:
        """Start the server and wait until ``/health/live`` answers 200 (exits the script if
        the server stops or does not answer within ``start_timeout`` seconds)."""
        log = self.log_path.open("ab" if self.append_log else "wb")
        self.process = subprocess.Popen(
            self.command,
            cwd=ROOT,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"the server exited; see {self.log_path}")
            try:
                if httpx.get(f"{self.url}/health/live", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise SystemExit(f"the server did not start; see {self.log_path}")

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def dockerfile_command(port: int) -> list[str]:
    """The Dockerfile's ``CMD`` (exec form), listening on 127.0.0.1:``port`` instead of
    0.0.0.0:8000, with the programs of this checkout's virtual environment."""
    line = next(
        line for line in (ROOT / "Dockerfile").read_text().splitlines() if line.startswith("CMD [")
    )
    argv: list[str] = json.loads(line.removeprefix("CMD "))
    every_interface = "0.0.0.0"  # noqa: S104 (replaced, never bound)
    argv = [arg.replace(every_interface, "127.0.0.1").replace("8000", str(port)) for arg in argv]
    program = Path(sys.executable).parent / argv[0]
    return [sys.executable if argv[0] == "python" else str(program), *argv[1:]]


class ServedProcess(WorkerProcess):
    """The server in one of four shapes: ``dockerfile``, exactly what the image's ``CMD`` runs
    (one replica's whole serving shape); ``worker``, one worker of it; ``daphne``, one plain
    daphne process; or any other command line, with ``{port}`` for the port (to weigh another
    shape: ``--server "python manage.py serve --server daphne --bind 127.0.0.1:{port}"``)."""

    def __init__(self, database_url: str, *, shape: str, **kwargs: Any) -> None:
        super().__init__(database_url, **kwargs)
        self.shape = shape

    @property
    def command(self) -> list[str]:
        if self.shape == "dockerfile":
            return dockerfile_command(self.port)
        if self.shape == "worker":
            return super().command
        if self.shape == "daphne":
            return worker_argv(self.port, application=self.application, server="daphne")
        argv = shlex.split(self.shape.replace("{port}", str(self.port)))
        return [str(Path(sys.executable).parent / argv[0]), *argv[1:]]


@contextlib.contextmanager
def profiled(server: WorkerProcess, path: str | None) -> Iterator[None]:
    """With ``path``: py-spy samples the server's processes (the GIL holders) meanwhile and
    writes collapsed stacks to ``path``.txt. A diagnostic run: its numbers are not the
    measured ones."""
    if path is None:
        yield
        return
    spy = subprocess.Popen(
        [
            "py-spy",
            "record",
            "--pid",
            str(server.pid),
            "--subprocesses",
            "--gil",
            "--rate",
            "200",
            "--format",
            "raw",
            "--output",
            f"{path}.txt",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1)  # py-spy attaches
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=30)


def server_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every benchmark of a served console takes."""
    parser.add_argument("--redis-url", default=None, help="the Redis channel layer at this URL")
    parser.add_argument(
        "--server",
        default="dockerfile",
        help="dockerfile (the image's CMD), worker (one of its workers), daphne, or a command "
        "line with {port}",
    )
    parser.add_argument("--label", default="", help="suffix of the result files' names")
    parser.add_argument(
        "--grow",
        type=int,
        default=0,
        help="first add this many settled tasks, with an audit record each (MySQL/MariaDB)",
    )
    parser.add_argument(
        "--profile", action="store_true", help="py-spy the server (a diagnostic run)"
    )


# --- Clients ------------------------------------------------------------------------------------


def signin_form(page: str, username: str, password: str) -> dict[str, str]:
    """The fields to post to ``/signin``, with the CSRF token of ``page`` (its ``GET``)."""
    match = CSRF_INPUT.search(page)
    assert match, "the sign-in page carries no CSRF token"
    return {"csrfmiddlewaretoken": match[1], "username": username, "password": password}


# --- Growth -------------------------------------------------------------------------------------


def grow(database_url: str, namespace_id: str, rows: int) -> dict[str, Any]:
    """Add ``rows`` settled tasks (SUCCEEDED) with one audit record each to the namespace, by
    doubling copies of one of its tasks in SQL (MySQL/MariaDB only): the weight of a ledger
    that has been in use for a long time, for measuring that the figures do not move with it.
    The copies' audit records are not chained (``audit verify`` would flag them)."""
    from orbit_console.ledger.models import OperationAudit, Task

    connection = mysql_connect(database_url, charset="utf8mb4", autocommit=True)
    # Random ids: a year of use has made ids in every hour of their cycle (lib/ids.py).
    task_columns = [field.column for field in Task._meta.concrete_fields]
    fresh = {
        "id": "MD5(UUID())",
        "state": "'SUCCEEDED'",
        "business_key": "CONCAT('grow:', MD5(UUID()))",
        "retry_of": "NULL",
        "effect_uncertain": "0",
    }
    select = ", ".join(fresh.get(column, f"`{column}`") for column in task_columns)
    insert = ", ".join(f"`{column}`" for column in task_columns)
    began = time.monotonic()
    cursor = connection.cursor()
    cursor.execute(
        f"INSERT INTO ledger_task ({insert}) SELECT {select} FROM ledger_task "  # noqa: S608
        "WHERE namespace_id = %s ORDER BY id LIMIT 1",
        [namespace_id],
    )
    made = 1
    while made < rows:
        cursor.execute(
            f"INSERT INTO ledger_task ({insert}) SELECT {select} FROM ledger_task "  # noqa: S608
            "WHERE namespace_id = %s AND business_key LIKE 'grow:%%' LIMIT %s",
            [namespace_id, min(made, rows - made)],
        )
        made += cursor.rowcount
    audit_columns = [field.column for field in OperationAudit._meta.concrete_fields]
    audit_values = {
        "id": "MD5(UUID())",
        "namespace_id": "t.namespace_id",
        "task_id": "t.id",
        "seq": "1",
        "operation_id": "MD5(UUID())",
        "actor_id": "MD5(t.id)",
        "action": "'task.accepted'",
        "reason": "'growth'",
        "evidence_ref": "NULL",
        "before": "'{}'",
        "after": "'{}'",
        "created_at": "t.created_at",
        "prev_hash": "''",
        "entry_hash": "SHA2(t.id, 256)",
        "key_id": "''",
    }
    cursor.execute(
        f"INSERT INTO ledger_operationaudit ({', '.join(f'`{c}`' for c in audit_columns)}) "  # noqa: S608
        f"SELECT {', '.join(audit_values[c] for c in audit_columns)} FROM ledger_task t "
        "WHERE t.namespace_id = %s AND t.business_key LIKE 'grow:%%'",
        [namespace_id],
    )
    audits = cursor.rowcount
    cursor.execute("ANALYZE TABLE ledger_task, ledger_operationaudit")
    cursor.fetchall()
    connection.close()
    return {"tasks": made, "audit_records": audits, "seconds": round(time.monotonic() - began, 1)}
