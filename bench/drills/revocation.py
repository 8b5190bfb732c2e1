"""Drill 2 (issue 34): a person's access taken away three ways while they work, and how long
each path they act through keeps acting.

    uv run python bench/drills/revocation.py [--database-url mysql://root@127.0.0.1:3306/drill_revocation]
        [--redis-url redis://127.0.0.1:6379/13]

For each way — the person's credential revoked at the recovery API (as Orbit's administrator
would), their role taken away (``console user NAME --role auditor``: an operator left with
only the auditor's role), the person disabled
(``is_active`` off, as the admin does) — a fresh person is signed in on one replica, has their
decisions page's live socket open on the other, an event stream of the recovery API open with
their token (which the drill lets subscribe, as an integration's token would), a retry they
decided applied and followed (its new task still to run), a batch of their reviews started and
paused with nothing of it applied, and one decision stored but not yet sent (they confirmed
while the API was unreachable). At t = 0 the access is taken away, the API comes back, a
supervisor resumes the batch and a worker runs the retry's new task; the drill then measures,
each path on its own:

- **page**: the first time a task's review page, asked every 0.1 s on both replicas, is refused
  (not 200);
- **socket**: when the live socket is closed, and with what code;
- **event stream**: when the API closes the stream opened with the person's token, and with
  what code (or that it stays open);
- **batch items**: when every item of the paused batch has ended once resumed, and how (applied,
  or refused with the API's or the console's reason on its submission);
- **follow-up**: when the follow-up of the person's applied retry ends, once its new task has
  run (the feed reads it with its own token; it must not depend on the person's access);
- **stored decision**: when the reconciler has sent it and what became of it — applied, or
  rejected and *told* (its page shows the state and the API's reason): never dropped.

The rig's feed consumes the namespace's event stream (``feed add --namespace``), as a
deployment that follows docs/deployment.md does.

Results: stdout and ``var/bench/drill-revocation.json``; docs/reliability.md.
"""

from __future__ import annotations

import argparse
import contextlib
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
    run_manage,
)

WAIT_S = 40.0  # the longest the drill waits for one path to be refused
BATCH_TASKS = 4


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
    return _closing(socket, ConnectionClosed)


def stream_watch(
    api_url: str, user_id: int, namespace_id: str
) -> Callable[[float], dict[str, Any]]:
    """Let the person's token subscribe (as ``orbit credential --permission events:subscribe``
    would grant an integration's), create a subscription with it and open its event stream
    at the API; a function that, given t = 0, waits for the API to close it."""
    import httpx
    from websockets.exceptions import ConnectionClosed
    from websockets.sync.client import connect

    from orbit_console.ledger.auth import hash_token
    from orbit_console.ledger.models import Credential
    from orbit_console.lib.secretbox import unseal
    from orbit_console.people.models import OrbitCredential

    held = OrbitCredential.objects.get(user_id=user_id, namespace_id=namespace_id)
    token = unseal(held.token_ciphertext)
    issued = Credential.objects.get(token_hash=hash_token(token))
    issued.permissions = f"{issued.permissions} events:subscribe"
    issued.save(update_fields=["permissions"])
    bearer = {"Authorization": f"Bearer {token}"}
    created = httpx.post(
        f"{api_url}/v1/subscriptions",
        headers={**bearer, "Idempotency-Key": secrets.token_hex(16)},
        json={"name": f"drill {user_id}"},
        timeout=30,
    )
    created.raise_for_status()
    subscription = created.json()["data"]["id"]
    stream = connect(
        f"{api_url.replace('http://', 'ws://')}/v1/subscriptions/{subscription}/events",
        subprotocols=["orbit.events.v1"],  # type: ignore[list-item]
        origin=api_url,  # type: ignore[arg-type]
        additional_headers=bearer,
        open_timeout=30,
    )

    def heartbeat() -> None:  # the protocol's own pings (three missed close the stream: 4408)
        with contextlib.suppress(ConnectionClosed):
            while True:
                stream.send(json.dumps({"type": "ping"}))
                time.sleep(3)

    threading.Thread(target=heartbeat, daemon=True).start()
    return _closing(stream, ConnectionClosed)


def _closing(connection: Any, closed_error: type[Exception]) -> Callable[[float], dict[str, Any]]:
    """Read ``connection`` until it closes; a function that, given t = 0, waits for that."""
    closed: dict[str, Any] = {}
    done = threading.Event()

    def read() -> None:
        try:
            while True:
                connection.recv()
        except closed_error as gone:
            closed["at"] = time.monotonic()
            received = getattr(gone, "rcvd", None)
            closed["code"] = received.code if received else None
        done.set()

    threading.Thread(target=read, daemon=True).start()

    def wait(began: float) -> dict[str, Any]:
        done.wait(timeout=max(0.0, began + WAIT_S - time.monotonic()))
        if not done.is_set():
            connection.close()
            return {"closed_after_s": None, "code": None}
        if closed["at"] < began:
            return {"closed_after_s": "before t=0", "code": closed["code"]}
        return {"closed_after_s": round(closed["at"] - began, 2), "code": closed["code"]}

    return wait


def applied_retry(console: Any, url: str, task_id: str) -> str:
    """The person retries ``task_id`` through the wizard; the new task's id, once the retry is
    applied and followed."""
    from bench.faults import SUBMISSION_LINK
    from orbit_console.decisions.models import FollowUp, Submission
    from tests.console.web import retry_values, wizard_submit, wizard_to_confirm

    console.http.base_url = url
    confirm = wizard_to_confirm(console, task_id, "retry", retry_values())
    sent = wizard_submit(console, task_id, "retry", confirm.text)
    found = SUBMISSION_LINK.search(sent.headers.get("location", "") or sent.text)
    assert found, sent.text[:300]
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        submission = Submission.objects.get(id=found.group(1))
        if submission.result_task_id and FollowUp.objects.filter(submission=submission).exists():
            return str(submission.result_task_id)
        time.sleep(0.2)
    raise RuntimeError(f"the retry {found.group(1)} was not applied and followed")


def paused_batch(user_id: int, namespace_id: str, queue_id: str) -> str:
    """A batch of the person's reviews, started (every submission stored) and paused at once,
    while the API is unreachable: nothing of it is applied before t = 0."""
    from asgiref.sync import async_to_sync
    from django.contrib.auth.models import User

    from bench.faults import fresh_task
    from orbit_console.decisions import batches
    from orbit_console.people.models import OrbitCredential
    from orbit_console.people.person import orbit_client

    user = User.objects.get(pk=user_id)
    credential = OrbitCredential.objects.get(user_id=user_id, namespace_id=namespace_id)
    task_ids = [fresh_task(queue_id, "review") for _ in range(BATCH_TASKS)]

    async def read() -> list[batches.Seen]:
        async with orbit_client(credential) as orbit:  # in this process: not through the proxy
            return [batches.Seen(task, await orbit.get_task(task)) for task in task_ids]

    batch = batches.batch_create(
        action="review",
        created_by=user,
        namespace_id=namespace_id,
        selection={"scope": "revocation drill"},
        seen=async_to_sync(read)(),
    )
    batches.batch_verify(batch, person=user)
    decision = {
        "reason": "drill 2: the person's batch when their access is taken away",
        "evidence_ref": "drill:REVOKE-1",
        "outcome": "SUCCEEDED",
        "result": '{"settled":"{{business_key}}"}',
        "template": True,
    }
    batches.batch_decide(batch, person=user, decision=decision)
    batches.batch_submit(batch, person=user, typed_count=BATCH_TASKS)
    batches.batch_store(batch_id=batch.id)
    batches.batch_pause(batch_id=batch.id, person=user)
    return batch.id


def batch_end(batch_id: str, began: float) -> dict[str, Any]:
    """When every item of the resumed batch has ended, and how each ended (its outcome, and the
    answer its submission was told)."""
    from collections import Counter

    from orbit_console.decisions.models import BatchItem

    items = BatchItem.objects.filter(batch_id=batch_id).select_related("submission")
    while time.monotonic() - began < WAIT_S + 20:
        if not items.filter(outcome="").exists():
            break
        time.sleep(0.2)
    ended = not items.filter(outcome="").exists()
    told = Counter(
        f"{item.outcome or 'open'}"
        + (
            f" ({item.submission.http_status or ''} {item.submission.error_code})".replace(
                "( ", "("
            )
            if item.submission and item.submission.error_code
            else ""
        )
        for item in items
    )
    return {
        "items": items.count(),
        "ended_after_s": round(time.monotonic() - began, 2) if ended else None,
        "outcomes": dict(told),
    }


def followup_end(task_id: str, began: float) -> dict[str, Any]:
    """A worker runs the retry's new task now; when its follow-up ends."""
    from orbit_console.decisions.models import FollowUp
    from orbit_console.ledger import lifecycle
    from orbit_console.ledger.models import AttemptOutcome, Task

    task = Task.objects.get(id=task_id)
    worker = lifecycle.actor_id_for(task.namespace_id, "drill-worker")
    lifecycle.attempt_start(task=task, worker_id="drill-worker")
    lifecycle.attempt_finish(
        task=task, worker_actor_id=worker, outcome=AttemptOutcome.SUCCEEDED, result="{}"
    )
    followup = FollowUp.objects.filter(submission__result_task_id=task_id)
    while time.monotonic() - began < WAIT_S + 20:
        if followup.filter(ended_at__isnull=False).exists():
            return {"ended_after_s": round(time.monotonic() - began, 2)}
        time.sleep(0.2)
    return {"ended_after_s": None}


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
    code, out = run_manage(
        {"DATABASE_URL": database_url}, "feed", "add", "--namespace", seeded["namespace_id"]
    )
    assert code == 0, out
    from django.contrib.auth.models import User
    from django.db import connections

    from orbit_console.decisions import batches
    from orbit_console.people.credentials import person_enroll
    from tests.console.web import Console

    supervisor = User.objects.create_user(username="revocation-supervisor")
    person_enroll(
        user=supervisor, roles=frozenset({"supervisor"}), namespace_id=seeded["namespace_id"]
    )

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
            stream = stream_watch(replicas.url(rig.api), person.user_id, seeded["namespace_id"])
            followed = applied_retry(console, urls[0], fresh_task(seeded["queue_id"], "retry"))
            pending = stored_decision(
                rig, console, urls[0], fresh_task(seeded["queue_id"], "review")
            )
            batch = paused_batch(person.user_id, seeded["namespace_id"], seeded["queue_id"])
            page_task = fresh_task(seeded["queue_id"], "review")
            began = time.monotonic()
            take_away(person.user_id, seeded["namespace_id"])
            rig.api_proxy.set_mode("pass")
            batches.batch_resume(batch_id=batch, person=supervisor)
            measured = at_once(
                page=partial(first_refusal, urls, console, f"/tasks/{page_task}/review", began),
                socket=partial(watch, began),
                stream=partial(stream, began),
                batch=partial(batch_end, batch, began),
                followup=partial(followup_end, followed, began),
                decision=partial(decision_end, pending, began),
            )
            page, socket, decision = measured["page"], measured["socket"], measured["decision"]
            if pending is not None:  # what the person is shown (signed in as an administrator
                # would look; the person themself may no longer be able to see it)
                from orbit_console.decisions.models import Submission

                shown = Submission.objects.get(id=pending)
                decision["error_message"] = shown.error_message[:160]
            console.close()
            results["ways"][way] = {
                "page": page,
                "socket": socket,
                "event_stream": measured["stream"],
                "batch_items": measured["batch"],
                "follow_up": measured["followup"],
                "stored_decision": decision,
            }
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
        and way["batch_items"]["ended_after_s"] is not None
        and way["follow_up"]["ended_after_s"] is not None
        for way in results["ways"].values()
    )
    print("PASSED" if passed else "FAILED")
    return 0 if passed else 1


if __name__ == "__main__":
    os.chdir(ROOT)
    sys.exit(main())
