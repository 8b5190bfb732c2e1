"""Throughput of the recovery API's review, beside the raw-SQL ceiling of the same transaction.

    uv run python bench/review_api.py --database-url mysql://root@127.0.0.1:3306/orbit_bench
        [--redis-url redis://127.0.0.1:6379/14] [--clients 8] [--requests 2000]
        [--server dockerfile|worker|daphne] [--subscriptions N] [--label L]

1. A fresh database (``support.fresh_database``: the MySQL/MariaDB database named, dropped and
   created again; its name must contain "bench"), migrated and seeded with ``orbit seed``, plus
   ``--requests`` tasks in NEEDS_REVIEW for the API and as many again for the ceiling.
2. **Ceiling**: ``--clients`` threads, each with its own MySQLdb connection, run the review's
   transaction as raw SQL, statement for statement what the ORM sends (the credential and its
   queues, then in one transaction: the task ``FOR UPDATE``, the idempotency record ``FOR
   UPDATE``, the task update, both quota releases, the audit chain head, the audit insert, the
   successor check, the idempotency receipt, the result event and what it owes the event
   stream's subscriptions, ``COMMIT``). Transactions a
   second: the most this database could give the API on this machine.
3. **The server**: ``--server dockerfile`` (the default) runs the Dockerfile's ``CMD`` from this
   checkout, bound to a free port of 127.0.0.1 instead of ``0.0.0.0:8000``, with
   ``ORBIT_ENV`` unset (the embedded default on this database): exactly what one production
   replica runs. ``--server worker`` runs one worker of it, ``--server daphne`` one plain
   daphne process, for comparison.
4. **First calls**: ``--clients`` threads, each with one keep-alive HTTP connection, post
   ``POST /v1/tasks/{id}:review`` for distinct tasks (a fresh idempotency key each) as fast as
   the answers come. Then **replays**: the same requests again, each answered from its stored
   receipt. Then ``GET /health/live`` for a few seconds. For each: requests a second, latency
   percentiles, and the CPU the server's processes used.

Results: a table on stdout and ``var/bench/review_api[-<label>].json``; written up in
docs/performance.md and never asserted in tests.
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import http.client
import json
import queue
import secrets
import shlex
import sys
import threading
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from support import (
    BENCH_DIR,
    ServedProcess,
    fresh_database,
    grow,
    loadavg,
    machine,
    manage,
    mysql_connect,
    needs_review_tasks,
    profiled,
    server_arguments,
    setup_django,
    summary,
    tree_cpu_seconds,
)

HEALTH_SECONDS = 5.0


# --- The world ----------------------------------------------------------------------------------


def build_world(database_url: str, count: int, subscriptions: int = 0) -> dict[str, Any]:
    manage(database_url, "migrate", "--verbosity", "0")
    seeded = json.loads(manage(database_url, "orbit", "seed"))
    for index in range(subscriptions):  # each is owed every review's event (docs/events.md)
        namespace = seeded["namespace_id"]
        manage(database_url, "events", "subscribe", "--namespace", namespace, "--name", f"s{index}")
    setup_django(database_url)
    from django.db import connections

    api_tasks = needs_review_tasks(seeded, count, key_prefix="bench-api")
    raw_tasks = needs_review_tasks(seeded, count, key_prefix="bench-raw")
    connections.close_all()
    return {**seeded, "api_tasks": api_tasks, "raw_tasks": raw_tasks}


def review_body(revision: int = 3) -> bytes:
    return json.dumps(
        {
            "expected_revision": str(revision),
            "reason": "Benchmark: the object store shows the write never happened",
            "evidence_ref": "evidence:bench",
            "execution_settled": True,
            "outcome": "FAILED",
            "result": {"confirmed": True},
        }
    ).encode()


# --- Running N clients --------------------------------------------------------------------------


def run_clients(
    clients: int, jobs: Sequence[Any], work: Callable[[Any, Any], None], connect: Callable[[], Any]
) -> tuple[float, list[float]]:
    """``work(connection, job)`` for every job, on ``clients`` threads with a connection each;
    the wall time and each job's latency in milliseconds."""
    todo: queue.SimpleQueue[Any] = queue.SimpleQueue()
    for job in jobs:
        todo.put(job)
    latencies: list[float] = []
    errors: list[BaseException] = []
    start = threading.Barrier(clients + 1)

    def client() -> None:
        connection = connect()
        start.wait()
        try:
            while True:
                try:
                    job = todo.get_nowait()
                except queue.Empty:
                    return
                began = time.perf_counter()
                work(connection, job)
                latencies.append((time.perf_counter() - began) * 1000)
        except BaseException as error:
            errors.append(error)
        finally:
            connection.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for thread in threads:
        thread.start()
    start.wait()
    began = time.perf_counter()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - began
    if errors:
        raise SystemExit(f"a client failed: {errors[0]!r}")
    return wall, latencies


def figures(wall: float, latencies: list[float], cpu: float | None = None) -> dict[str, Any]:
    result = {"requests": len(latencies), "per_s": round(len(latencies) / wall, 1)}
    result.update({f"{k}_ms": v for k, v in summary(latencies).items() if k.startswith("p")})
    if cpu is not None:
        result["server_cpu_pct"] = round(100 * cpu / wall, 1)
    return result


# --- The ceiling: the same transaction in raw SQL -----------------------------------------------


def raw_review_ceiling(database_url: str, world: dict[str, Any], clients: int) -> dict[str, Any]:
    from orbit_console.ledger.models import (
        Application,
        Credential,
        IdempotencyRecord,
        OperationAudit,
        Queue,
        Task,
        TaskEvent,
    )

    def columns(model: Any) -> str:
        return ", ".join(f"`{field.column}`" for field in model._meta.concrete_fields)

    from orbit_console.lib.auditkeys import _keyring
    from orbit_console.lib.ids import new_id  # the ids the ledger makes: the same pages

    token_hash = hashlib.sha256(world["tokens"]["admin"].encode()).hexdigest()
    audit_key_id, keys = _keyring()
    audit_key = keys[audit_key_id]
    credential = Credential.objects.get(token_hash=token_hash)
    tasks = {task.id: task for task in Task.objects.filter(id__in=world["raw_tasks"])}

    def connect() -> Any:
        connection = mysql_connect(database_url, charset="utf8mb4")
        # As the application's connections are (settings.py).
        connection.cursor().execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        return connection

    def review(connection: Any, task_id: str) -> None:
        task = tasks[task_id]
        now = datetime.now(UTC).replace(tzinfo=None)
        key = hashlib.sha256(secrets.token_hex(8).encode()).hexdigest()
        cursor = connection.cursor()
        cursor.execute(
            f"SELECT {columns(Credential)} FROM ledger_credential WHERE token_hash = %s "  # noqa: S608
            "ORDER BY id LIMIT 1",
            [token_hash],
        )
        cursor.execute(
            f"SELECT q.* FROM {Queue._meta.db_table} q JOIN ledger_credential_queues cq "  # noqa: S608
            "ON q.id = cq.queue_id WHERE cq.credential_id IN (%s)",
            [credential.id],
        )
        cursor.execute(
            f"SELECT {columns(Task)} FROM ledger_task WHERE id = %s AND namespace_id = %s "  # noqa: S608
            "ORDER BY id LIMIT 1 FOR UPDATE",
            [task.id, task.namespace_id],
        )
        cursor.execute(
            f"SELECT {columns(IdempotencyRecord)} FROM ledger_idempotencyrecord "  # noqa: S608
            "WHERE action = %s AND key_digest = %s AND namespace_id = %s AND task_id = %s "
            "ORDER BY id LIMIT 1 FOR UPDATE",
            ["task.review", key, task.namespace_id, task.id],
        )
        cursor.execute(
            "UPDATE ledger_task SET state = %s, revision = %s, result = %s, completed_at = %s, "
            "updated_at = %s, effect_uncertain = 0 WHERE id = %s",
            ["FAILED", task.revision + 1, '{"confirmed":true}', now, now, task.id],
        )
        for model, row_id in ((Queue, task.queue_id), (Application, task.application_id)):
            cursor.execute(
                f"UPDATE {model._meta.db_table} SET in_use = in_use - 1 "  # noqa: S608
                "WHERE id = %s AND in_use > 0",
                [row_id],
            )
        cursor.execute(
            "SELECT seq, entry_hash FROM ledger_operationaudit WHERE task_id = %s "
            "ORDER BY 1 DESC LIMIT 1",
            [task.id],
        )
        seq, prev_hash = cursor.fetchone()
        audit_id = new_id()
        cursor.execute(
            f"INSERT INTO ledger_operationaudit ({columns(OperationAudit)}) "  # noqa: S608
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                audit_id,
                task.namespace_id,
                task.id,
                seq + 1,
                new_id(),
                credential.actor_id,
                "task.review",
                "Benchmark: the object store shows the write never happened",
                "evidence:bench",
                '{"state":"NEEDS_REVIEW","revision":"3"}',
                '{"state":"FAILED","revision":"4","effect_uncertain":false}',
                now,
                prev_hash,
                # An HMAC-SHA256 like the API's (lib/auditkeys.py), over a stand-in content.
                hmac.new(audit_key, f"{prev_hash}{audit_id}".encode(), "sha256").hexdigest(),
                audit_key_id,
            ],
        )
        cursor.execute(
            "SELECT id FROM ledger_task WHERE namespace_id = %s AND retry_of = %s "
            "ORDER BY id LIMIT 1",
            [task.namespace_id, task.id],
        )
        cursor.execute(
            f"INSERT INTO ledger_idempotencyrecord ({columns(IdempotencyRecord)}) "  # noqa: S608
            "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
            [
                new_id(),
                task.namespace_id,
                "task.review",
                task.id,
                key,
                key,
                200,
                audit_id,
                '{"id":"' + task.id + '","state":"FAILED","revision":"4"}',
                now,
                now + timedelta(days=7),
            ],
        )
        # The result event (naming the review), owed to the namespace's subscriptions in one
        # statement (none here: the statement still runs).
        event_fields = [f for f in TaskEvent._meta.concrete_fields if f.name != "sequence"]
        values = {
            "event_id": new_id(),
            "namespace_id": task.namespace_id,
            "queue_id": task.queue_id,
            "task_id": task.id,
            "kind": "task.completed",
            "state": "FAILED",
            "revision": task.revision + 1,
            "result": '{"confirmed":true}',
            "operation": "task.review",
            "audit_id": audit_id,
            "detail": "{}",
            "created_at": now,
        }
        cursor.execute(
            f"INSERT INTO ledger_taskevent ({', '.join(f'`{f.column}`' for f in event_fields)}) "  # noqa: S608
            f"VALUES ({', '.join(['%s'] * len(event_fields))})",
            [values[field.name] for field in event_fields],
        )
        cursor.execute(
            "INSERT INTO events_delivery (subscription_id, sequence, attempt, claim_id, "
            "created_at) SELECT id, %s, 0, '', %s FROM events_subscription "
            "WHERE namespace_id = %s AND (queue_ids = '' OR queue_ids LIKE %s)",
            [cursor.lastrowid, now, task.namespace_id, f"%{task.queue_id}%"],
        )
        connection.commit()

    wall, latencies = run_clients(clients, world["raw_tasks"], review, connect)
    return figures(wall, latencies)


# --- The API over HTTP --------------------------------------------------------------------------


class Http:
    """One keep-alive connection that checks every answer's status."""

    def __init__(self, port: int) -> None:
        self.connection = http.client.HTTPConnection("127.0.0.1", port, timeout=60)

    def call(self, method: str, path: str, body: bytes | None, headers: dict[str, str]) -> bytes:
        self.connection.request(method, path, body=body, headers=headers)
        response = self.connection.getresponse()
        data = response.read()
        if response.status != 200:
            raise RuntimeError(f"{method} {path} answered {response.status}: {data[:300]!r}")
        return data

    def close(self) -> None:
        self.connection.close()


def measure_api(
    server: ServedProcess, world: dict[str, Any], clients: int, profile: str | None = None
) -> dict[str, Any]:
    auth = {"Authorization": f"Bearer {world['tokens']['admin']}", "Host": "127.0.0.1"}
    body = review_body()
    jobs = [(task_id, secrets.token_hex(12)) for task_id in world["api_tasks"]]

    def review(http: Http, job: tuple[str, str]) -> None:
        task_id, key = job
        headers = {**auth, "Content-Type": "application/json", "Idempotency-Key": key}
        answer = http.call("POST", f"/v1/tasks/{task_id}:review", body, headers)
        if b'"deduplicated":' not in answer:
            raise RuntimeError(f"not a receipt: {answer[:200]!r}")

    def connect() -> Http:
        return Http(server.port)

    warm = min(50, len(jobs) // 10)
    run_clients(clients, jobs[:warm], review, connect)
    results: dict[str, Any] = {}
    for name, batch in (("first_calls", jobs[warm:]), ("replays", jobs[warm:])):
        cpu = tree_cpu_seconds(server.pid)
        with profiled(server, f"{profile}-{name}" if profile else None):
            wall, latencies = run_clients(clients, batch, review, connect)
        results[name] = figures(wall, latencies, tree_cpu_seconds(server.pid) - cpu)

    def health(http: Http, _: int) -> None:
        http.call("GET", "/health/live", None, {"Host": "127.0.0.1"})

    # As many probes as the server answered reviews in HEALTH_SECONDS, at least 2 000.
    probes = max(2000, int(results["first_calls"]["per_s"] * HEALTH_SECONDS))
    cpu = tree_cpu_seconds(server.pid)
    wall, latencies = run_clients(clients, range(probes), health, connect)
    results["health_live"] = figures(wall, latencies, tree_cpu_seconds(server.pid) - cpu)
    return results


# --- Report -------------------------------------------------------------------------------------


def report(results: dict[str, Any]) -> None:
    print(
        f"\nserver: {results['server']}   load before/after: {results['load_before']} / "
        f"{results['load_after']}"
    )
    print(f"{'what':<22}{'req/s':>9}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}{'server CPU':>12}")
    for name in ("raw_sql_ceiling", "first_calls", "replays", "health_live"):
        row = results.get(name)
        if not row:
            continue
        cpu = f"{row['server_cpu_pct']} %" if "server_cpu_pct" in row else ""
        print(
            f"{name:<22}{row['per_s']:>9}{row['p50_ms']:>9}{row['p95_ms']:>9}{row['p99_ms']:>9}"
            f"{cpu:>12}"
        )
    if results.get("raw_sql_ceiling"):
        share = results["first_calls"]["per_s"] / results["raw_sql_ceiling"]["per_s"]
        print(f"first calls as a share of the raw-SQL ceiling: {100 * share:.1f} %")


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True, help="mysql://.../<name with 'bench'>")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument(
        "--subscriptions",
        type=int,
        default=0,
        help="event-stream subscriptions of the namespace, owed every review's event",
    )
    server_arguments(parser)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if not args.database_url.startswith("mysql"):
        raise SystemExit("the raw-SQL ceiling is written for MySQL/MariaDB: pass a mysql:// URL")
    database_url = fresh_database(args.database_url, "unused.sqlite3")
    world = build_world(database_url, args.requests, args.subscriptions)
    results: dict[str, Any] = {
        "machine": machine(),
        "clients": args.clients,
        "subscriptions": args.subscriptions,
    }
    if args.grow:
        results["grown"] = grow(database_url, world["namespace_id"], args.grow)
    results["load_before"] = loadavg()
    results["raw_sql_ceiling"] = raw_review_ceiling(database_url, world, args.clients)
    extra = {"REDIS_URL": args.redis_url} if args.redis_url else {}
    name = f"review_api{'-' + args.label if args.label else ''}"
    server = ServedProcess(
        database_url, shape=args.server, log_path=BENCH_DIR / f"{name}.log", extra_env=extra
    ).start()
    results["server"] = shlex.join(server.command)
    try:
        profile = str(BENCH_DIR / f"{name}-profile") if args.profile else None
        results.update(measure_api(server, world, args.clients, profile))
    finally:
        server.stop()
    results["load_after"] = loadavg()
    (BENCH_DIR / f"{name}.json").write_text(json.dumps(results, indent=2))
    report(results)


if __name__ == "__main__":
    sys.exit(main())
