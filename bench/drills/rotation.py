"""Drill 1 (issue 34): every credential the console holds rotated, with rolling restarts of two
console replicas (and the reconciler and the API) under load.

    uv run python bench/drills/rotation.py [--database-url mysql://root@127.0.0.1:3306/drill_rotation]
        [--redis-url redis://127.0.0.1:6379/13] [--people 3] [--keep-database]

The procedure is docs/runbooks.md, "Rotating credentials"; the drill follows it to the letter:

1. *Accept the new keys*: a rolling restart with each new key added where it is accepted but not
   used (``SECRET_KEY_FALLBACKS``, second in ``ORBIT_TOKEN_KEYS`` and ``ORBIT_AUDIT_KEYS``, the
   new signing key's public key in ``ORBIT_AUDIT_VERIFY_KEYS``).
2. *Use the new keys*: a rolling restart with each new key first and the old one accepted.
3. ``manage.py keys reseal``; one person's Orbit API token replaced (``manage.py console user``);
   a checkpoint signed with the new signing key.
4. ``manage.py keys retire-check``: what still needs an old key, and what to do now (its exit
   status 1: something is to be done).
5. *Retire*: a rolling restart without what the check says nothing needs (the old token key,
   the old ``SECRET_KEY``, the old private signing key); the old audit HMAC key and the old
   signing key's public key stay, because old records verify only with them. ``keys
   retire-check`` then exits 0: nothing is left to do, only keys kept on purpose (a script can
   rely on it, issue 41).
6. ``manage.py audit verify`` with the final keys.

People make decisions all along (each walks a wizard, then opens the work queue, on whichever
replica the balancer gives them). The drill counts what was lost (must be 0), duplicated (must
be 0), decisions whose submission did not succeed (must be 0), people sent to sign in (must be
0), and pages that failed. Results: stdout and ``var/bench/drill-rotation.json``; written up in
docs/reliability.md. ``tests/ops/test_drills.py`` runs the mixed-keys moment in the suite.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import secrets
import shutil
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    ROOT,
    Load,
    drill_database,
    drop_drill_database,
    run_dir,
    run_manage,
    settle,
    stage,
)


@dataclass(frozen=True)
class KeySet:
    secret_key: str
    token_key: str  # Fernet
    audit_key: str  # HMAC
    signing_key: str  # Ed25519 private, URL-safe base64

    @classmethod
    def new(cls) -> KeySet:
        from cryptography.fernet import Fernet

        return cls(
            secret_key=secrets.token_urlsafe(50),
            token_key=Fernet.generate_key().decode(),
            audit_key=secrets.token_urlsafe(32),
            signing_key=secrets.token_urlsafe(32),
        )

    @property
    def public_key(self) -> str:
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
        from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

        raw = base64.urlsafe_b64decode(self.signing_key + "=" * (-len(self.signing_key) % 4))
        public = Ed25519PrivateKey.from_private_bytes(raw).public_key()
        return base64.urlsafe_b64encode(
            public.public_bytes(Encoding.Raw, PublicFormat.Raw)
        ).decode()


def phases(old: KeySet, new: KeySet) -> dict[str, dict[str, str]]:
    """The environment of each step of the runbook."""
    return {
        "before": {
            "SECRET_KEY": old.secret_key,
            "SECRET_KEY_FALLBACKS": "",
            "ORBIT_TOKEN_KEYS": old.token_key,
            "ORBIT_AUDIT_KEYS": old.audit_key,
            "ORBIT_AUDIT_SIGNING_KEYS": old.signing_key,
            "ORBIT_AUDIT_VERIFY_KEYS": "",
        },
        "accept new": {
            "SECRET_KEY": old.secret_key,
            "SECRET_KEY_FALLBACKS": new.secret_key,
            "ORBIT_TOKEN_KEYS": f"{old.token_key},{new.token_key}",
            "ORBIT_AUDIT_KEYS": f"{old.audit_key},{new.audit_key}",
            "ORBIT_AUDIT_SIGNING_KEYS": old.signing_key,
            "ORBIT_AUDIT_VERIFY_KEYS": new.public_key,
        },
        "use new": {
            "SECRET_KEY": new.secret_key,
            "SECRET_KEY_FALLBACKS": old.secret_key,
            "ORBIT_TOKEN_KEYS": f"{new.token_key},{old.token_key}",
            "ORBIT_AUDIT_KEYS": f"{new.audit_key},{old.audit_key}",
            "ORBIT_AUDIT_SIGNING_KEYS": new.signing_key,
            "ORBIT_AUDIT_VERIFY_KEYS": old.public_key,
        },
        "retire old": {
            "SECRET_KEY": new.secret_key,
            "SECRET_KEY_FALLBACKS": "",
            "ORBIT_TOKEN_KEYS": new.token_key,
            "ORBIT_AUDIT_KEYS": f"{new.audit_key},{old.audit_key}",  # old records need it
            "ORBIT_AUDIT_SIGNING_KEYS": new.signing_key,
            "ORBIT_AUDIT_VERIFY_KEYS": old.public_key,  # old checkpoints need it
        },
    }


def observer_uses(env: dict[str, str]) -> None:
    """The drill's own process (which makes the tasks, as the outside world does) takes the
    keys of a step too, so that no record is linked with a key the step retired."""
    from django.conf import settings

    from orbit_console.lib import auditkeys

    settings.ORBIT_AUDIT_KEYS = env["ORBIT_AUDIT_KEYS"].split(",")
    settings.ORBIT_TOKEN_KEYS = env["ORBIT_TOKEN_KEYS"].split(",")
    auditkeys._keyring.cache_clear()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="mysql://root@127.0.0.1:3306/drill_rotation")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--people", type=int, default=3, help="people making decisions")
    parser.add_argument("--soak", type=float, default=5.0, help="seconds of load between steps")
    parser.add_argument("--keep-database", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from support import BENCH_DIR, loadavg, machine

    from bench.faults import RIG_ENV, drop_rig_user

    old, new = KeySet.new(), KeySet.new()
    env_of = phases(old, new)
    checkpoints = run_dir("rotation")
    os.environ.update(RIG_ENV)
    os.environ.update(env_of["before"])
    os.environ["ORBIT_AUDIT_CHECKPOINT_DIR"] = str(checkpoints)
    database_url = drill_database(args.database_url)
    from django.db import connections

    staged = stage(database_url, args.redis_url, people=args.people, name="rotation")
    seeded, people, replicas = staged.seeded, staged.people, staged.replicas
    base = {"DATABASE_URL": database_url}
    results: dict[str, Any] = {"machine": machine(), "load_before": loadavg(), "steps": []}
    began = time.monotonic()

    def step(name: str, **what: Any) -> None:
        entry = {"step": name, "at_s": round(time.monotonic() - began, 1), **what}
        results["steps"].append(entry)
        print(json.dumps(entry), flush=True)

    load = None
    try:
        replicas.start()
        load = Load(replicas, people, seeded["queue_id"]).start()
        time.sleep(args.soak)
        code, out = run_manage(base | env_of["before"], "audit", "checkpoint")
        step("checkpoint with the old signing key", ok=code == 0, output=out.strip()[-200:])
        step("restart: accept new keys", seconds=replicas.restart_all(env_of["accept new"]))
        observer_uses(env_of["accept new"])
        time.sleep(args.soak)
        step("restart: use new keys", seconds=replicas.restart_all(env_of["use new"]))
        observer_uses(env_of["use new"])
        time.sleep(args.soak)
        used = base | env_of["use new"]
        code, out = run_manage(used, "keys", "reseal")
        step("keys reseal", ok=code == 0, output=out.strip())
        code, out = run_manage(
            used, "console", "user", people[0].username, "--role", "operator",
            "--namespace", seeded["namespace_id"],
        )  # fmt: skip
        step("a person's Orbit token replaced", ok=code == 0, output=out.strip()[-200:])
        code, out = run_manage(used, "audit", "checkpoint")
        step("checkpoint with the new signing key", ok=code == 0, output=out.strip()[-200:])
        time.sleep(args.soak)
        code, out = run_manage(used, "keys", "retire-check")
        step("keys retire-check", exit=code, output=out.strip().splitlines())
        results["retire_check_exit_before"] = code  # 1: old keys to remove
        code, report = run_manage(used, "keys", "retire-check", "--json")
        results["retire_check"] = json.loads(report[: report.rindex("}") + 1])
        step("restart: retire old keys", seconds=replicas.restart_all(env_of["retire old"]))
        observer_uses(env_of["retire old"])
        time.sleep(args.soak)
    finally:
        if load is not None:
            load.stop()
    try:
        final = base | env_of["retire old"]
        code, out = run_manage(final, "keys", "retire-check")
        step("keys retire-check after retiring", exit=code, output=out.strip().splitlines())
        results["retire_check_exit_after"] = code  # 0: nothing left to do
        code, out = run_manage(final, "audit", "checkpoint")
        code, out = run_manage(final, "audit", "verify")
        step("audit verify with the final keys", exit=code, output=out.strip().splitlines()[-6:])
        results["audit_verify_exit"] = code
        assert load is not None
        results["load"] = {
            **settle(load.tally.decisions),
            "signed_out": load.tally.signed_out,
            "errors": load.tally.errors,
            "pages": load.tally.pages,
        }
    finally:
        replicas.stop()
        drop_rig_user()
        connections.close_all()
        if not args.keep_database:
            drop_drill_database(database_url)
            shutil.rmtree(checkpoints, ignore_errors=True)
    results["seconds"] = round(time.monotonic() - began)
    results["load_after"] = loadavg()
    (BENCH_DIR / "drill-rotation.json").write_text(json.dumps(results, indent=2))
    tally = results["load"]
    print(f"\nload average before/after: {results['load_before']} / {results['load_after']}")
    print(
        f"decisions {tally['decisions']}: applied once {tally['applied_once']}, lost "
        f"{tally['lost']}, duplicated {tally['duplicated']}, not succeeded "
        f"{len(tally['not_succeeded'])}; signed out {len(tally['signed_out'])}; page errors "
        f"{len(tally['errors'])}; audit verify exit {results['audit_verify_exit']}"
    )
    passed = (
        tally["lost"] == 0
        and tally["duplicated"] == 0
        and not tally["not_succeeded"]
        and not tally["signed_out"]
        and not tally["errors"]
        and results["audit_verify_exit"] == 0
        and results["retire_check_exit_before"] == 1
        and results["retire_check_exit_after"] == 0
    )
    print("PASSED" if passed else "FAILED")
    return 0 if passed else 1


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
