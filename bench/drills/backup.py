"""Drill 3 (issue 34), backup and restore: a consistent backup of MariaDB taken while people
decide, restored into a new database, and a console pointed at it.

    uv run python bench/drills/backup.py [--database-url mysql://root@127.0.0.1:3306/drill_backup]
        [--redis-url redis://127.0.0.1:6379/13] [--people 3] [--keep-databases]

The rig and load of ``common.py`` run on ``drill_backup_<run>``; mid-load ``mariadb-dump
--single-transaction`` writes a backup, and people keep deciding after it. The backup is then
restored into ``drill_backup_<run>_restored`` and a console is started on it. The drill checks:

- every decision the console had stored when the backup began is in the restored database
  (lost: must be 0);
- those made after it are *reported*: the recovery API's idempotency records (here the live
  database, which plays the API's own store that the restore did not touch) list every
  review and retry the API applied; those whose decision is missing from the restored console
  are listed (each with its task, action and audit id) — and every decision missing from the
  restored console must be on that list;
- the restored console serves a decision from before the backup, receipt included;
- ``manage.py audit verify`` on the restored database, against the checkpoints (one signed
  before the backup, one after it): before the restore is declared it must fail (a rewind,
  undeclared, is tampering); ``manage.py audit declare-restore --taken-at <the backup's time>``
  then declares it, signed, and ``audit verify`` must pass and name it as a declared restore.
  As the runbook says, the restore is declared before any process writes to the restored
  database (a record written there first would be one kept after records the backup lacks:
  the declaration is refused, issue 39), so the restored console starts after it;
- that an undeclared rewind is named *as a rewind* (issue 41: the verify above fails first of
  all because the restored copy has another name than the database the checkpoints describe,
  which it would do with nothing rewound too): at the end, every process stopped, the backup is
  restored *in place* (the live database emptied and loaded from it: its name unchanged) and
  ``audit verify`` is run against the checkpoints as they were before the declaration. It must
  fail, every problem it shows a chain cut short by the restore ("… were removed"), none
  another database.

Results: stdout and ``var/bench/drill-backup.json``; docs/reliability.md. Both databases, the
backup and the checkpoints are removed at the end (``--keep-databases`` keeps them).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    ROOT,
    Load,
    Replicas,
    drill_database,
    drop_drill_database,
    empty_database,
    run_dir,
    run_manage,
    settle,
    stage,
)

from orbit_console.lib.rfc3339 import format_utc


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="mysql://root@127.0.0.1:3306/drill_backup")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--people", type=int, default=3)
    parser.add_argument("--soak", type=float, default=15.0, help="seconds of load before/after")
    parser.add_argument("--keep-databases", action="store_true")
    return parser.parse_args(argv)


def mysql_args(database_url: str) -> tuple[list[str], str]:
    import dj_database_url

    config = dj_database_url.parse(database_url)
    args = [
        f"--host={config.get('HOST') or '127.0.0.1'}",
        f"--port={config.get('PORT') or 3306}",
        f"--user={config.get('USER') or 'root'}",
    ]
    if config.get("PASSWORD"):
        args.append(f"--password={config['PASSWORD']}")
    return args, str(config["NAME"])


def submissions_of(database: str) -> dict[str, dict[str, str]]:
    """{submission id: its task, action, idempotency key digest, state, the API's audit id}
    in ``database``."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id, task_id, action, idempotency_key, state, audit_id FROM `{database}`."  # noqa: S608
            "console_submission"
        )
        return {
            row[0]: {
                "task_id": row[1],
                "action": row[2],
                "key_digest": hashlib.sha256(row[3].encode()).hexdigest(),
                "state": row[4],
                "audit_id": row[5],
            }
            for row in cursor.fetchall()
        }


def applied_per_api(database: str) -> list[dict[str, str]]:
    """The writes the API applied, from its idempotency records (each names its task, its
    action and the digest of the idempotency key the console sent)."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT task_id, action, key_digest FROM `{database}`.ledger_idempotencyrecord"  # noqa: S608
        )
        return [
            {"task_id": row[0], "action": row[1], "key_digest": row[2]} for row in cursor.fetchall()
        ]


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from support import BENCH_DIR, loadavg, machine

    from bench.faults import (
        RIG_ENV,
        Service,
        _worker,
        drop_rig_user,
        free_port,
    )

    os.environ.update(RIG_ENV)
    folder = run_dir("backup")
    checkpoints = folder / "checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)
    os.environ["ORBIT_AUDIT_CHECKPOINT_DIR"] = str(checkpoints)
    database_url = drill_database(args.database_url)
    restored_url = drill_database(args.database_url, suffix="restored")
    from django.db import connections

    staged = stage(database_url, args.redis_url, people=args.people, name="backup")
    seeded, people, replicas = staged.seeded, staged.people, staged.replicas
    base = {"DATABASE_URL": database_url}
    dump = folder / "backup.sql"
    connection_args, live_name = mysql_args(database_url)
    _, restored_name = mysql_args(restored_url)
    results: dict[str, Any] = {"machine": machine(), "load_before": loadavg()}
    began = time.monotonic()
    load = None
    restored_console = None
    try:
        replicas.start()
        load = Load(replicas, people, seeded["queue_id"]).start()
        time.sleep(args.soak)
        code, out = run_manage(base, "audit", "checkpoint")  # the newest the backup will hold
        assert code == 0, out
        backup_time = datetime.now(UTC)
        before = submissions_of(live_name)  # stored before the backup began
        dump_began = time.monotonic()
        with dump.open("wb") as out_file:
            subprocess.run(
                ["mariadb-dump", *connection_args, "--single-transaction", "--routines",
                 "--triggers", live_name],
                stdout=out_file, check=True,
            )  # fmt: skip
        results["dump_seconds"] = round(time.monotonic() - dump_began, 2)
        results["dump_bytes"] = dump.stat().st_size
        time.sleep(args.soak)
        load.stop()
        results["load"] = {
            **settle(load.tally.decisions),
            "signed_out": load.tally.signed_out,
            "errors": load.tally.errors,
        }
        code, out = run_manage(base, "audit", "checkpoint")  # signs the heads after the backup
        results["checkpoint_after_backup"] = out.strip()[-200:]
        restore_began = time.monotonic()
        with dump.open("rb") as in_file:
            subprocess.run(["mariadb", *connection_args, restored_name], stdin=in_file, check=True)
        results["restore_seconds"] = round(time.monotonic() - restore_began, 2)

        live = submissions_of(live_name)
        restored = submissions_of(restored_name)
        lost_before = sorted(set(before) - set(restored))
        restored_digests = {row["key_digest"] for row in restored.values()}
        console_digests = {row["key_digest"] for row in live.values()}
        reported = [
            row
            for row in applied_per_api(live_name)
            if row["key_digest"] in console_digests and row["key_digest"] not in restored_digests
        ]
        reported_digests = {row["key_digest"] for row in reported}
        missing = {
            sid: row
            for sid, row in live.items()
            if sid not in restored and row["state"] == "succeeded"
        }
        unreported = [
            sid for sid, row in missing.items() if row["key_digest"] not in reported_digests
        ]
        results["restore"] = {
            "stored_before_backup": len(before),
            "lost_of_those": lost_before,
            "in_restored": len(restored),
            "applied_after_backup_missing_from_restored": len(missing),
            "reported_by_idempotency_records": reported,
            "missing_but_not_reported": unreported,
        }

        # The audit first: the restore is declared before anything writes to the restored
        # database (docs/runbooks.md, "Backing up and restoring the database").
        restored_base = {"DATABASE_URL": restored_url}
        code, out = run_manage(restored_base, "audit", "verify")
        results["audit_verify_undeclared"] = {
            "exit": code,
            "output": out.strip().splitlines()[-8:],
        }
        undeclared = folder / "checkpoints-before-the-declaration"
        shutil.copytree(checkpoints, undeclared)  # for the rewind restored in place, below
        code, out = run_manage(
            restored_base, "audit", "declare-restore",
            "--taken-at", format_utc(backup_time),
            "--reason", "drill 3: restored from the mariadb-dump backup",
        )  # fmt: skip
        results["declare_restore"] = {"exit": code, "output": out.strip()[-400:]}
        code, out = run_manage(restored_base, "audit", "verify")
        results["audit_verify_declared"] = {
            "exit": code,
            "output": out.strip().splitlines()[-8:],
            "names_declared_restore": "declared restore:" in out,
        }
        port = free_port()
        restored_env = {**staged.rig.console.env, "DATABASE_URL": restored_url}
        restored_console = Service("console-restored", _worker(port), restored_env, port, BENCH_DIR)
        restored_console.start()
        from tests.console.web import Console

        sample = next(
            (sid for sid in before if restored.get(sid, {}).get("state") == "succeeded"), None
        )
        if sample is None:
            raise SystemExit(f"no decision had succeeded before the backup: {results}")
        with Console(f"http://127.0.0.1:{port}") as console:
            console.sign_in(people[0])  # type: ignore[arg-type]
            page = console.get(f"/submissions/{sample}")
        results["restored_console_serves"] = {
            "submission": sample,
            "status": page.status_code,
            "receipt_shown": 'id="receipt-audit-id"' in page.text,
        }
        # The console's own report of what it lacks: ``manage.py restored`` on the restored
        # database, asking the API (a live replica's embedded API, which the restore did not
        # rewind) with a token that may read the audit.
        code, out = run_manage(
            {
                **restored_base,
                "ORBIT_API_URL": Replicas.url(staged.rig.console),
                "ORBIT_RESTORE_TOKEN": seeded["tokens"]["admin"],
            },
            "restored", "--since", format_utc(backup_time), "--json",
        )  # fmt: skip
        listed = json.loads(out[out.index("{") :]) if "{" in out else {"missing": []}
        listed_ids = {row["audit_id"] for row in listed["missing"]}
        missing_ids = {row["audit_id"] for row in missing.values() if row["audit_id"]}
        results["restored_command"] = {
            "exit": code,
            "applied_since": listed.get("applied_since"),
            "listed": len(listed_ids),
            "missing_from_restored_not_listed": sorted(missing_ids - listed_ids),
        }

        # The undeclared rewind, as a restore in place makes it: every process stopped, the
        # live database emptied and loaded from the backup. Its name is the one the
        # checkpoints describe, so verification holds the chains to what they signed.
        replicas.stop()
        restored_console.stop()
        restored_console = None
        empty_database(database_url)
        with dump.open("rb") as in_file:
            subprocess.run(["mariadb", *connection_args, live_name], stdin=in_file, check=True)
        code, out = run_manage(
            {**base, "ORBIT_AUDIT_CHECKPOINT_DIR": str(undeclared)}, "audit", "verify"
        )
        lines = out.strip().splitlines()
        shown = [line for line in lines if line.strip().startswith("- ")]
        counted = re.search(r"^problems: (\d+)$", out, re.M)
        results["audit_verify_undeclared_in_place"] = {
            "exit": code,
            "problems": int(counted.group(1)) if counted else 0,
            "every_problem_shown_is_a_chain_cut_short": bool(shown)
            and all("were removed" in line for line in shown),
            "blames_another_database": "describes the database" in out,
            "output": lines[-8:],
        }
    finally:
        if load is not None:
            load.stop()
        if restored_console is not None:
            restored_console.stop()
        replicas.stop()
        drop_rig_user()
        connections.close_all()
        if not args.keep_databases:
            drop_drill_database(database_url)
            drop_drill_database(restored_url)
            shutil.rmtree(folder, ignore_errors=True)
    results["seconds"] = round(time.monotonic() - began)
    results["load_after"] = loadavg()
    (BENCH_DIR / "drill-backup.json").write_text(json.dumps(results, indent=2))
    print(json.dumps({k: v for k, v in results.items() if k != "machine"}, indent=2))
    restore = results["restore"]
    restore_missing = restore["applied_after_backup_missing_from_restored"]
    passed = (
        not restore["lost_of_those"]
        and not restore["missing_but_not_reported"]
        and results["load"]["lost"] == 0
        and results["load"]["duplicated"] == 0
        and results["restored_console_serves"]["receipt_shown"]
        and results["audit_verify_undeclared"]["exit"] != 0
        and results["audit_verify_undeclared_in_place"]["exit"] != 0
        and results["audit_verify_undeclared_in_place"]["every_problem_shown_is_a_chain_cut_short"]
        and not results["audit_verify_undeclared_in_place"]["blames_another_database"]
        and not results["restored_command"]["missing_from_restored_not_listed"]
        and results["restored_command"]["exit"] == (1 if restore_missing else 0)
        and results["declare_restore"]["exit"] == 0
        and results["audit_verify_declared"]["exit"] == 0
        and results["audit_verify_declared"]["names_declared_restore"]
    )
    print("PASSED" if passed else "FAILED")
    return 0 if passed else 1


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
