"""Drill 4 (issue 34), database switchover: a MariaDB primary with a replica on this machine
(two ``mariadbd`` of the drill's own, real GTID replication: ``tests/support/mariadb_pair.py``),
the primary stopped mid-load and the replica promoted, the console's database host moved to it.

    uv run python bench/drills/switchover.py [--people 3] [--soak 15] [--hold 5] [--crash]

Every process of the rig (two console replicas, the reconciler, the API) and the drill's own
observer reach the database through one TCP proxy that plays the database's host name (a DNS
name or a virtual IP that moves): ``DATABASE_URL`` never changes. Mid-load the switchover is
the one a planned failover does: the host stops taking connections and drops those it holds
(writers are refused), the replica is waited for until it applied everything the primary's
binary log holds, the database stays unreachable ``--hold`` seconds (a failover that takes its
time, so that walks and decisions meet it), the primary is stopped (clean shutdown), the
replica is promoted (replication stopped and forgotten, ``read_only`` off), and the host points
at it. The drill reports:

- decisions lost (told stored or sent, then not applied on the new primary): must be 0;
- decisions duplicated (applied twice, or two successors): must be 0;
- decisions told as not stored (the page said the decision could not be stored), and that no
  such one was applied after all;
- what people saw fail, and when, against the switchover's window; the time to recover (from
  the host's refusal to the first decision applied on the new primary).

Results: stdout and ``var/bench/drill-switchover.json``; docs/reliability.md. The two servers
are stopped and their data removed at the end (``--keep`` keeps them).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import ROOT, Load, drill_database, run_dir, settle, stage

from tests.support.mariadb_pair import pair, promote, relay_applied, replica_caught_up


class ObservedLoad(Load):
    """The drill's load; the observer's own database connection (it makes the tasks) is
    reopened after the switchover dropped it: that is the drill's harness, not a person."""

    def _one(self, console: Any, person: Any, action: str) -> None:
        from django.db import DatabaseError, connection

        try:
            super()._one(console, person, action)
        except DatabaseError:
            connection.close()
            time.sleep(0.5)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/12")
    parser.add_argument("--people", type=int, default=3)
    parser.add_argument("--soak", type=float, default=15.0, help="seconds of load before/after")
    parser.add_argument(
        "--hold",
        type=float,
        default=5.0,
        help="seconds the database stays unreachable before the host moves (a failover that "
        "takes its time: people's walks and decisions meet it)",
    )
    parser.add_argument(
        "--crash",
        action="store_true",
        help="an unplanned failover: the primary is killed (SIGKILL) mid-load, and the replica "
        "promoted with what it had received",
    )
    parser.add_argument("--keep", action="store_true", help="keep the two servers' data")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from support import BENCH_DIR, loadavg, machine

    from bench.faults import (
        RIG_ENV,
        free_port,
    )
    from tests.support.proxy import TcpProxy

    os.environ.update(RIG_ENV)
    base_dir = run_dir("switchover")
    results: dict[str, Any] = {"machine": machine(), "load_before": loadavg()}
    began = time.monotonic()
    primary, replica = pair(base_dir, free_port(), free_port())
    host = TcpProxy(("127.0.0.1", primary.port))  # the database's host name
    database_url = drill_database(f"mysql://root@127.0.0.1:{host.port}/drill_switchover")
    load = None
    replicas = None
    try:
        staged = stage(database_url, args.redis_url, people=args.people, name="switch")
        from django.db import connection, connections

        seeded, people, replicas = staged.seeded, staged.people, staged.replicas
        replicas.start()
        load = ObservedLoad(replicas, people, seeded["queue_id"]).start()
        time.sleep(args.soak)

        # The switchover.
        window_began = time.monotonic() - load.began
        switch_began = time.monotonic()
        if args.crash:
            primary.kill()
            host.set_mode("refuse")
            dropped = host.cut()
            gtid = relay_applied(replica, 60)  # what the replica had received, applied
            caught_up = True  # by definition: nothing more can come
        else:
            host.set_mode("refuse")
            dropped = host.cut()
            rows = primary.sql("SELECT @@gtid_binlog_pos", socket=True)
            gtid = str(rows[0][0]) if rows else ""
            caught_up = replica_caught_up(gtid, replica, 60)
        time.sleep(args.hold)
        primary.stop()
        promote(replica)
        host.upstream = ("127.0.0.1", replica.port)
        host.set_mode("pass")
        switched = time.monotonic()
        results["switchover"] = {
            "kind": "unplanned: the primary killed" if args.crash else "planned",
            "connections_dropped": dropped,
            "gtid_applied_by_the_replica": gtid,
            "replica_caught_up": caught_up,
            "seconds": round(switched - switch_began, 2),
            "held_unreachable_seconds": args.hold,
            "window": [round(window_began, 1), round(switched - load.began, 1)],
        }
        time.sleep(args.soak)
        load.stop()

        connection.close()
        from orbit_console.decisions.models import Submission
        from orbit_console.ledger.models import OperationAudit

        decisions = load.tally.decisions
        stored = [
            d
            for d in decisions
            if d.submission_id or Submission.objects.filter(task_id=d.task_id).exists()
        ]
        not_stored = [d for d in decisions if d not in stored]
        settled = settle(stored)
        applied_anyway = [
            d.task_id
            for d in not_stored
            if OperationAudit.objects.filter(task_id=d.task_id, action=f"task.{d.action}").exists()
        ]
        other_answers = [
            {
                "task_id": d.task_id,
                "action": d.action,
                "first_answer": d.first,
                "started_at": round(d.started, 1),
                "page_linked_the_stored_decision": d.submission_id is not None,
                "stored": d in stored,
                "applied": OperationAudit.objects.filter(
                    task_id=d.task_id, action=f"task.{d.action}"
                ).count(),
            }
            for d in decisions
            if d.first != "receipt"
        ]
        after = [d for d in stored if d.started >= window_began]
        first_after = min((d.started for d in after), default=None)
        results["load"] = {
            **settled,
            "told_not_stored": len(not_stored),
            "answered_otherwise_than_a_receipt": other_answers,
            "told_not_stored_but_applied": applied_anyway,
            "signed_out": load.tally.signed_out,
            "errors": load.tally.errors,
            "first_decision_stored_after_the_window_began_at": first_after,
        }
        if first_after is not None:
            results["switchover"]["time_to_recover_seconds"] = round(first_after - window_began, 1)
        connections.close_all()
    finally:
        if load is not None:
            load.stop()
        if replicas is not None:
            replicas.stop()
        host.close()
        primary.stop()
        replica.stop()
        if not args.keep:
            shutil.rmtree(base_dir, ignore_errors=True)
    results["seconds"] = round(time.monotonic() - began)
    results["load_after"] = loadavg()
    (BENCH_DIR / "drill-switchover.json").write_text(json.dumps(results, indent=2))
    print(json.dumps({k: v for k, v in results.items() if k != "machine"}, indent=2))
    load_result = results["load"]
    passed = (
        results["switchover"]["replica_caught_up"]
        and load_result["lost"] == 0
        and load_result["duplicated"] == 0
        and not load_result["told_not_stored_but_applied"]
        and not load_result["not_succeeded"]
        and "time_to_recover_seconds" in results["switchover"]
    )
    print("PASSED" if passed else "FAILED")
    return 0 if passed else 1


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
