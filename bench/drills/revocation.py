"""Drill 2 (issue 34): a person's access taken away three ways while they work, and how long
each path they act through keeps acting.

    uv run python bench/drills/revocation.py [--database-url mysql://root@127.0.0.1:3306/drill_revocation]
        [--redis-url redis://127.0.0.1:6379/13]

For each way — the person's credential revoked at the recovery API (as Orbit's administrator
would), their role taken away (``console user NAME --role auditor``: an operator left with
only the auditor's role), the person disabled
(``is_active`` off, as the admin does) — a fresh person is signed in on one replica, has their
decisions page's live socket open on the other, and has one decision stored but not yet sent
(they confirmed while the API was unreachable). At t = 0 the access is taken away and the API
comes back; the drill then measures, each path on its own:

- **page**: the first time a task's review page, asked every 0.1 s on both replicas, is refused
  (not 200);
- **socket**: when the live socket is closed, and with what code;
- **stored decision**: when the reconciler has sent it and what became of it — applied, or
  rejected and *told* (its page shows the state and the API's reason): never dropped.

Results: stdout and ``var/bench/drill-revocation.json``; docs/reliability.md.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import threading
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from common import (
    ROOT,
    Replicas,
    drill_database,
    drop_drill_database,
    migrate_and_seed,
)

WAIT_S = 40.0  # the longest the drill waits for one path to be refused


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", default="mysql://root@127.0.0.1:3306/drill_revocation")
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13")
    parser.add_argument("--keep-database", action="store_true")
    return parser.parse_args(argv)


def revoke_at_api(user_id: int, namespace_id: str) -> None:
    from orbit_console.ledger.auth import hash_token
    from orbit_console.ledger.lifecycle import credential_revoke
    from orbit_console.ledger.models import Credential
    from orbit_console.lib.secretbox import unseal
    from orbit_console.people.models import OrbitCredential

    held = OrbitCredential.objects.get(user_id=user_id, namespace_id=namespace_id)
    issued = Credential.objects.get(token_hash=hash_token(unseal(held.token_ciphertext)))
    credential_revoke(credential=issued)


def take_role(user_id: int, namespace_id: str) -> None:
    """What ``manage.py console user NAME --role auditor`` does: the person keeps only the
    auditor's role, and a credential for it replaces (and revokes) the operator's."""
    from django.contrib.auth.models import User

    from orbit_console.people.credentials import person_enroll

    user = User.objects.get(pk=user_id)
    person_enroll(user=user, roles=frozenset({"auditor"}), namespace_id=namespace_id)


def disable(user_id: int, namespace_id: str) -> None:
    from django.contrib.auth.models import User

    User.objects.filter(pk=user_id).update(is_active=False)


WAYS: dict[str, Callable[[int, str], None]] = {
    "credential revoked at the API": revoke_at_api,
    "role taken away": take_role,
    "person disabled": disable,
}


def first_refusal(urls: list[str], console: Any, path: str, began: float) -> dict[str, Any]:
    """Ask ``path`` on each replica in turn until one is not 200; when, where, what."""
    while time.monotonic() - began < WAIT_S:
        for url in urls:
            console.http.base_url = url
            page = console.get(path)
            if page.status_code != 200:
                return {
                    "refused_after_s": round(time.monotonic() - began, 2),
                    "status": page.status_code,
                    "location": page.headers.get("location", ""),
                }
        time.sleep(0.1)
    return {"refused_after_s": None}


def socket_watch(url: str, cookie: str) -> Callable[[float], dict[str, Any]]:
    """Open the decisions page's socket; a function that, given t = 0, waits for it to close."""
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    ws_url = url.replace("http://", "ws://") + "/ws/decisions"
    socket = connect(
        ws_url, additional_headers={"Cookie": f"sessionid={cookie}", "Origin": url}, open_timeout=30
    )
    closed: dict[str, Any] = {}
    done = threading.Event()

    def read() -> None:
        try:
            while True:
                socket.recv()
        except ConnectionClosed as gone:
            closed["at"] = time.monotonic()
            closed["code"] = gone.rcvd.code if gone.rcvd else None
        done.set()

    threading.Thread(target=read, daemon=True).start()

    def wait(began: float) -> dict[str, Any]:
        done.wait(timeout=max(0.0, began + WAIT_S - time.monotonic()))
        if not done.is_set():
            socket.close()
            return {"closed_after_s": None, "code": None}
        if closed["at"] < began:
            return {"closed_after_s": "before t=0", "code": closed["code"]}
        return {"closed_after_s": round(closed["at"] - began, 2), "code": closed["code"]}

    return wait


def stored_decision(rig: Any, console: Any, url: str, task_id: str) -> str | None:
    """The person confirms a review while the API is unreachable: stored, not sent."""
    from bench.faults import SUBMISSION_LINK
    from tests.console.web import review_values, wizard_submit, wizard_to_confirm

    console.http.base_url = url
    confirm = wizard_to_confirm(console, task_id, "review", review_values())
    rig.api_proxy.set_mode("down")
    sent = wizard_submit(console, task_id, "review", confirm.text)
    found = SUBMISSION_LINK.search(sent.headers.get("location", "") or sent.text)
    return found.group(1) if found else None


def decision_end(submission_id: str | None, began: float) -> dict[str, Any]:
    from orbit_console.decisions.models import OPEN_STATES, Submission

    if submission_id is None:
        return {"stored": False}
    while time.monotonic() - began < WAIT_S + 20:
        submission = Submission.objects.get(id=submission_id)
        if submission.state not in OPEN_STATES:
            return {
                "stored": True,
                "ended_after_s": round(time.monotonic() - began, 2),
                "state": submission.state,
                "told": f"{submission.http_status} {submission.error_code}".strip(),
            }
        time.sleep(0.2)
    return {
        "stored": True,
        "ended_after_s": None,
        "state": Submission.objects.get(id=submission_id).state,
    }


def at_once(**calls: Callable[[], dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Run each measurement in its own thread, all from the same t = 0."""
    out: dict[str, dict[str, Any]] = {}

    def run(name: str, call: Callable[[], dict[str, Any]]) -> None:
        out[name] = call()

    threads = [threading.Thread(target=run, args=item) for item in calls.items()]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    from support import BENCH_DIR, loadavg, machine

    from bench.faults import RIG_ENV, Rig, create_rig_user, drop_rig_user, fresh_task, make_operator

    os.environ.update(RIG_ENV)
    os.environ["CONSOLE_PENDING_GRACE_SECONDS"] = "1"
    database_url = drill_database(args.database_url)
    seeded = migrate_and_seed(database_url)
    from django.db import connections

    from tests.console.web import Console

    rig_password = secrets.token_urlsafe(16)
    create_rig_user(rig_password)
    env = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    rig = Rig(
        database_url=database_url,
        redis_url=args.redis_url,
        env=env,
        logs=BENCH_DIR,
        rig_password=rig_password,
    )
    replicas = Replicas(rig, BENCH_DIR)
    results: dict[str, Any] = {"machine": machine(), "load_before": loadavg(), "ways": {}}
    began_all = time.monotonic()
    try:
        replicas.start()
        urls = [replicas.url(service) for service in replicas.consoles]
        for index, (way, take_away) in enumerate(WAYS.items()):
            person = make_operator(seeded["namespace_id"], f"revoked-{index}")
            console = Console(urls[0]).sign_in(person)  # type: ignore[arg-type]
            cookie = console.http.cookies["sessionid"]
            watch = socket_watch(urls[1], cookie)
            pending = stored_decision(
                rig, console, urls[0], fresh_task(seeded["queue_id"], "review")
            )
            page_task = fresh_task(seeded["queue_id"], "review")
            began = time.monotonic()
            take_away(person.user_id, seeded["namespace_id"])
            rig.api_proxy.set_mode("pass")
            measured = at_once(
                page=partial(first_refusal, urls, console, f"/tasks/{page_task}/review", began),
                socket=partial(watch, began),
                decision=partial(decision_end, pending, began),
            )
            page, socket, decision = measured["page"], measured["socket"], measured["decision"]
            if pending is not None:  # what the person is shown (signed in as an administrator
                # would look; the person themself may no longer be able to see it)
                from orbit_console.decisions.models import Submission

                shown = Submission.objects.get(id=pending)
                decision["error_message"] = shown.error_message[:160]
            console.close()
            results["ways"][way] = {"page": page, "socket": socket, "stored_decision": decision}
            print(json.dumps({way: results["ways"][way]}), flush=True)
    finally:
        replicas.stop()
        drop_rig_user()
        connections.close_all()
        if not args.keep_database:
            drop_drill_database(database_url)
    results["seconds"] = round(time.monotonic() - began_all)
    results["load_after"] = loadavg()
    (BENCH_DIR / "drill-revocation.json").write_text(json.dumps(results, indent=2))
    print(f"\nload average before/after: {results['load_before']} / {results['load_after']}")
    passed = all(
        way["page"]["refused_after_s"] is not None
        and way["stored_decision"].get("ended_after_s") is not None
        for way in results["ways"].values()
    )
    print("PASSED" if passed else "FAILED")
    return 0 if passed else 1


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
