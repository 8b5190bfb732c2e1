"""How long a new audit entry takes to reach the people watching a task's live timeline.

    uv run python bench/timeline_latency.py [--viewers 1,10,50] [--events 30] [--remote]
        [--database-url mysql://root@127.0.0.1:3306/orbit_bench] [--redis-url redis://...]

The script builds its own world and measures the real path end to end:

1. A fresh database (an SQLite file under ``var/bench/``, or the MySQL/MariaDB database named in
   ``--database-url``, dropped and created again; its name must contain "bench"), migrated with
   ``manage.py migrate`` and seeded with ``manage.py orbit seed``.
2. In this process (Django set up on the same ``DATABASE_URL``): up to 10 console people with the
   auditor role, and one task in NEEDS_REVIEW per measured event (accepted, started, finished with
   an unknown outcome: revision 3), so that every event is a valid, distinct review.
3. One real worker process (as ``manage.py serve`` runs them) serving the console and the
   embedded recovery API, with the in-memory channel layer or, with ``--redis-url``, the Redis
   one.
4. For each N and each event k: N WebSocket clients (the ``websockets`` package, spread over the
   people, each with its own session cookie and an Origin header) plus one real Chromium page
   open task k's timeline. The clients connect one after another, evenly over one re-check
   period of the consumers (``TIMELINE_RECHECK_SECONDS``, 5 s), so that their periodic
   authorisation checks against the API are spread as they are when viewers come and go, and
   the event meets that steady background load. Once every socket is accepted (the consumer
   has authorised the person and joined the task's group) and a short settle time has passed,
   the script reviews task k through the recovery API over HTTP with the admin token. That
   review writes one ``task.review`` audit record; its id is in the receipt and in the pushed
   fragment (``id="entry-op-<audit id>"``). The sockets are closed before the next event.

Latency of one (viewer, event) = the wall-clock time the fragment arrived at the client (or the
browser's MutationObserver saw ``li#entry-op-<id>`` inserted) minus a starting point; same
machine, same clock. Three starting points are reported:

- the audit record's ``created_at`` (read back from ``GET /v1/tasks/{id}/operations/{id}``),
  which the ledger takes inside the review's transaction, a few writes before the commit, so
  it slightly overstates commit-to-arrival;
- the commit: the server runs ``bench/commit_probe.py``, the console's application with the
  ledger's publish (``transaction.on_commit``) timed; ``--no-probe`` serves it unwrapped;
- the moment the review's HTTP response reached the script.

With ``--remote`` the console runs against an external Orbit (issue 17): two worker processes
on the one database instead of one.

- The "external Orbit": the embedded ledger serving the recovery API, wrapped by the probe as
  above, ``CONSOLE_FEED=off``. With ``--redis-url`` it uses the next database of that Redis
  server (``/12`` -> ``/13``): an external Orbit shares no channel layer with the console, and
  its own commit-hook announcements must not reach the console's sockets. With the in-memory
  layer each process has its own anyway.
- Before the console starts, its feed is configured as an operator would against an external
  Orbit: ``manage.py orbit credential`` issues a token in the seeded namespace with
  ``tasks:read tasks:audit:read events:subscribe``, and ``manage.py feed add --token-file``
  (with ``ORBIT_API_URL`` set) creates the subscription over HTTP and stores it as a source.
- The console: ``ORBIT_API_URL`` = the first process's address, ``CONSOLE_FEED=server``, the
  channel layer of the embedded mode. It holds the feed's lease and consumes the stream; for
  each event it reads the audit record back with the stream's credential and publishes it to
  the task's group. The script waits until the source's status is ``live`` before measuring.

The people are enrolled as in the embedded mode: ``person_enroll`` mints their credentials in
the ledger, which is the external Orbit's database too, and stores them sealed for the
console, which then sends them to the API over HTTP. Viewers and the browser connect to the
console; reviews go to the API; "commit" is the API process's probe. The console is served
through the probe too: there it notes when the feed published the entry, which splits
commit -> arrival into the stream's part (``commit_to_feed_ms``: the wake-up, the claim, the
frame, the read back, the inbox's transaction) and the console's fan-out (``from_feed_ms``).

Results: a table on stdout and ``var/bench/timeline_latency[-remote][-<label>].json``. Numbers
are written up in docs/performance.md; they are never asserted in tests.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import secrets
import shutil
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpx
from support import (
    BENCH_DIR,
    ROOT,
    WorkerProcess,
    fresh_database,
    loadavg,
    machine,
    manage,
    needs_review_tasks,
    process_cpu_seconds,
    setup_django,
    signin_form,
    summary,
)
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

MAX_PEOPLE = 10
ARRIVAL_TIMEOUT = 15.0
FEED_PERMISSIONS = ("tasks:read", "tasks:audit:read", "events:subscribe")
FEED_LIVE_TIMEOUT = 60.0
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]
ENTRY_OP = re.compile(r'id="entry-op-([0-9a-f]{32})"')

# Installed in the page before its own scripts run (Playwright injects it over the DevTools
# protocol, so the page's CSP does not apply): the wall-clock time at which each platform entry
# first enters the DOM, by audit id.
OBSERVER_JS = """
(() => {
  const seen = {};
  window.__orbitSeen = seen;
  const note = (node) => {
    if (node.nodeType !== 1) { return; }
    const stamp = performance.timeOrigin + performance.now();
    const found = node.matches('li[id^="entry-op-"]') ? [node] : [];
    node.querySelectorAll('li[id^="entry-op-"]').forEach((item) => found.push(item));
    for (const item of found) {
      const id = item.id.slice("entry-op-".length);
      if (!(id in seen)) { seen[id] = stamp; }
    }
  };
  new MutationObserver((records) => {
    for (const record of records) { record.addedNodes.forEach(note); }
  }).observe(document, { childList: true, subtree: true });
})();
"""


# --- Results ------------------------------------------------------------------------------------


@dataclass
class Sample:
    """When one client got one event, from three starting points (None: it never arrived)."""

    viewers: int
    event: int
    client: str  # "ws-<i>" or "browser"
    audit_id: str
    from_created_ms: float | None  # the audit record's created_at
    from_commit_ms: float | None  # the probe: publish, right after the commit (None: no probe)
    from_response_ms: float | None  # the review's HTTP response reaching the script
    from_feed_ms: float | None = None  # --remote: the console's feed publishing the entry


@dataclass
class Round:
    viewers: int
    event: int
    task_id: str
    audit_id: str
    connect_s: float
    settle_s: float
    review_http_ms: float  # the review's HTTP round trip, as the script saw it
    created_to_commit_ms: float | None  # the rest of the review's transaction, and its commit
    created_to_response_ms: float
    collector_ms: float | None  # the servers' garbage-collector pauses, created_at to last arrival
    commit_to_feed_ms: float | None = None  # --remote: the API's commit to the feed's publish


@dataclass
class Phase:
    viewers: int
    cpu_s: dict[str, float] = field(default_factory=dict)  # by process: server, or api + console
    wall_s: float = 0.0
    load_before: str = ""
    load_after: str = ""
    rounds: list[Round] = field(default_factory=list)
    samples: list[Sample] = field(default_factory=list)


# --- Database and world -------------------------------------------------------------------------


@dataclass
class World:
    namespace_id: str
    admin_token: str
    people: list[tuple[str, str]]  # (username, password)
    tasks: list[str]  # NEEDS_REVIEW tasks at revision 3, one per event


def build_world(database_url: str, *, people: int, tasks: int) -> World:
    """Seed a namespace, then add the auditors and the tasks to review, in this process."""
    seeded = json.loads(manage(database_url, "orbit", "seed"))
    setup_django(database_url)
    from django.contrib.auth.models import User
    from django.db import connections, transaction

    from orbit_console.people.credentials import person_enroll

    namespace_id = seeded["namespace_id"]
    accounts: list[tuple[str, str]] = []
    with transaction.atomic():
        for index in range(people):
            username, password = f"bench-auditor-{index}", secrets.token_urlsafe(12)
            user = User.objects.create_user(username=username, password=password)
            person_enroll(user=user, roles=frozenset({"auditor"}), namespace_id=namespace_id)
            accounts.append((username, password))

    task_ids = needs_review_tasks(seeded, tasks)
    connections.close_all()
    return World(namespace_id, seeded["tokens"]["admin"], accounts, task_ids)


# --- The server ---------------------------------------------------------------------------------


class Server(WorkerProcess):
    """One worker process serving the console and the embedded recovery API (``env`` says
    which parts it plays); with ``probe``, wrapped in ``bench/commit_probe.py``, whose notes it
    reads. ``name`` names its log and its probe's notes under ``var/bench/``."""

    def __init__(
        self,
        database_url: str,
        redis_url: str | None,
        *,
        probe: bool,
        gc_freeze: bool = False,
        name: str = "server",
        env: Mapping[str, str] | None = None,
    ) -> None:
        extra: dict[str, str] = dict(env or {})
        if redis_url:
            extra["REDIS_URL"] = redis_url
        self.name = name
        self.probe_path: Path | None = None
        application = "orbit_console.asgi:application"
        if probe:
            self.probe_path = BENCH_DIR / f"{name}-probe.txt"
            self.probe_path.unlink(missing_ok=True)
            extra["ORBIT_BENCH_PROBE_FILE"] = str(self.probe_path)
            if gc_freeze:
                extra["ORBIT_BENCH_GC_FREEZE"] = "1"
            application = "bench.commit_probe:application"
        super().__init__(
            database_url,
            log_path=BENCH_DIR / f"{name}.log",
            application=application,
            extra_env=extra,
        )

    def _notes(self) -> list[list[str]]:
        if self.probe_path is None or not self.probe_path.exists():
            return []
        return [line.split(" ") for line in self.probe_path.read_text().splitlines()]

    def published_at(self, audit_id: str) -> float | None:
        """When this process published this audit record to its channel layer (the probe's
        note), if it did: the ledger's commit hook, or the console's feed."""
        for note in self._notes():
            if note[0] == audit_id:
                return float(note[1])
        return None

    def collector_pauses_ms(self, start: float, end: float) -> float | None:
        """Milliseconds the server's garbage collector held the process between two times."""
        if self.probe_path is None:
            return None
        pauses = 0.0
        for note in self._notes():
            if note[0].startswith("gc") and start <= float(note[1]) <= end:
                pauses += float(note[2])
        return round(pauses, 3)


@dataclass
class Deployment:
    """Where the viewers connect (``console``) and where the reviews go (``api``): one process
    in the embedded mode, two with ``--remote``."""

    console: Server
    api: Server

    @property
    def remote(self) -> bool:
        return self.console is not self.api

    @property
    def servers(self) -> list[Server]:
        return [self.api, self.console] if self.remote else [self.api]

    def cpu_seconds(self) -> dict[str, float]:
        return {server.name: process_cpu_seconds(server.pid) for server in self.servers}

    def collector_pauses_ms(self, start: float, end: float) -> float | None:
        """The pauses of every process on the path (each one holds the entry up)."""
        pauses = [server.collector_pauses_ms(start, end) for server in self.servers]
        if any(pause is None for pause in pauses):
            return None
        return round(sum(pause for pause in pauses if pause is not None), 3)

    def stop(self) -> None:
        for server in reversed(self.servers):
            server.stop()


def serve_embedded(database_url: str, args: argparse.Namespace) -> Deployment:
    """One process: the console and the embedded API it calls in-process."""
    server = Server(database_url, args.redis_url, probe=not args.no_probe, gc_freeze=args.gc_freeze)
    server.start()
    return Deployment(console=server, api=server)


def serve_remote(database_url: str, args: argparse.Namespace, world: World) -> Deployment:
    """The external Orbit; the console's feed of its stream, configured; then the console,
    once its stream is live."""
    api = Server(
        database_url,
        other_redis_database(args.redis_url),
        probe=not args.no_probe,
        gc_freeze=args.gc_freeze,
        name="api",
        env={"CONSOLE_FEED": "off"},
    )
    api.start()
    deployment = Deployment(console=api, api=api)
    try:
        add_feed(database_url, api.url, world.namespace_id)
        console = Server(
            database_url,
            args.redis_url,
            probe=not args.no_probe,
            gc_freeze=args.gc_freeze,
            name="console",
            env={"ORBIT_API_URL": api.url, "CONSOLE_FEED": "server"},
        )
        deployment.console = console
        console.start()
        wait_until_live(world.namespace_id, console)
    except BaseException:
        deployment.stop()
        raise
    return deployment


def other_redis_database(url: str | None) -> str | None:
    """The next database of the same Redis server (``/12`` -> ``/13``): the external Orbit's
    own channel layer."""
    if not url:
        return None
    parts = urlsplit(url)
    number = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(number + 1) % 16}"))


def add_feed(database_url: str, api_url: str, namespace_id: str) -> None:
    """What an operator does against an external Orbit: a token issued by Orbit for the
    stream, then ``manage.py feed add`` with it (which creates the subscription over HTTP)."""
    permissions = [arg for permission in FEED_PERMISSIONS for arg in ("--permission", permission)]
    token = manage(
        database_url,
        "orbit",
        "credential",
        "--actor",
        "bench-feed",
        "--namespace",
        namespace_id,
        *permissions,
        "--recovery-access",
    ).strip()
    token_file = BENCH_DIR / "feed-token.txt"
    token_file.unlink(missing_ok=True)
    token_file.touch(mode=0o600)
    token_file.write_text(token + "\n")
    try:
        added = manage(
            database_url,
            "feed",
            "add",
            "--token-file",
            str(token_file),
            env={"ORBIT_API_URL": api_url},
        )
    finally:
        token_file.unlink(missing_ok=True)
    print(f"feed: {added.strip()}")


def feed_source(namespace_id: str) -> dict[str, Any] | None:
    """The console's source of this namespace as ``feed_source`` holds it (Django set up)."""
    from django.db import connections

    from orbit_console.feed.models import Source

    try:
        source = Source.objects.filter(namespace_id=namespace_id).first()
    finally:
        connections.close_all()
    if source is None:
        return None
    return {
        "subscription_id": source.subscription_id,
        "status": source.status,
        "status_note": source.status_note,
        "status_at": source.status_at.isoformat() if source.status_at else None,
        "last_event_at": source.last_event_at.isoformat() if source.last_event_at else None,
    }


def wait_until_live(namespace_id: str, console: Server) -> None:
    """Until the console's feed says the namespace's stream is live."""
    deadline = time.monotonic() + FEED_LIVE_TIMEOUT
    while time.monotonic() < deadline:
        source = feed_source(namespace_id)
        if source is not None and source["status"] == "live":
            print(f"feed: the stream of {source['subscription_id']} is live")
            return
        time.sleep(0.2)
    raise SystemExit(f"the console's feed did not go live ({source}); see {console.log_path}")


# --- Clients ------------------------------------------------------------------------------------


async def sign_in(base: str, username: str, password: str) -> str:
    """Sign in through the form, as a browser would; returns the session cookie."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        page = await http.get("/signin")
        response = await http.post("/signin", data=signin_form(page.text, username, password))
        session = http.cookies.get("sessionid")
        if response.status_code != 302 or not session:
            raise SystemExit(f"could not sign in as {username}: {response.status_code}")
        return session


class Viewer:
    """One WebSocket client on a task's timeline, noting when each platform entry arrives."""

    def __init__(self, name: str, ws: ClientConnection) -> None:
        self.name = name
        self.ws = ws
        self.seen: dict[str, float] = {}
        self.changed = asyncio.Event()
        self.listener = asyncio.create_task(self._listen())

    async def _listen(self) -> None:
        try:
            async for message in self.ws:
                now = time.time()
                text = message if isinstance(message, str) else message.decode()
                for match in ENTRY_OP.finditer(text):
                    self.seen.setdefault(match[1], now)
                self.changed.set()
        except ConnectionClosed:
            pass
        self.changed.set()

    async def arrival(self, audit_id: str, timeout: float) -> float | None:
        deadline = time.monotonic() + timeout
        while audit_id not in self.seen:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.listener.done():
                return None
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), remaining)
            except TimeoutError:
                return None
        return self.seen[audit_id]

    async def close(self) -> None:
        await self.ws.close()
        await self.listener


async def open_viewers(
    base: str, task_id: str, sessions: list[str], count: int, spread: float
) -> list[Viewer]:
    """Open ``count`` clients, the i-th ``i * spread / count`` seconds after the first."""
    url = base.replace("http://", "ws://") + f"/ws/tasks/{task_id}/timeline"

    async def one(index: int) -> Viewer:
        await asyncio.sleep(index * spread / count)
        ws = await connect(
            url,
            origin=base,  # type: ignore[arg-type]
            additional_headers={"Cookie": f"sessionid={sessions[index % len(sessions)]}"},
            open_timeout=60,
        )
        return Viewer(f"ws-{index}", ws)

    return list(await asyncio.gather(*(one(index) for index in range(count))))


class Browser:
    """One real Chromium page, signed in as an auditor, timing DOM insertions."""

    def __init__(self, base: str) -> None:
        self.base = base

    async def start(self, username: str, password: str) -> None:
        from playwright.async_api import async_playwright

        self.playwright = await async_playwright().start()
        self.browser = await self.playwright.chromium.launch(
            executable_path=shutil.which("chromium"), args=CHROMIUM_ARGS
        )
        context = await self.browser.new_context()
        context.set_default_timeout(60_000)
        await context.add_init_script(OBSERVER_JS)
        self.page = await context.new_page()
        await self.page.goto(f"{self.base}/signin")
        await self.page.fill("#id_username", username)
        await self.page.fill("#id_password", password)
        await self.page.click("form:has(#id_username) button[type=submit]")
        await self.page.wait_for_url(lambda url: "/signin" not in url)

    async def open_task(self, task_id: str) -> None:
        response = await self.page.goto(f"{self.base}/tasks/{task_id}")
        if response is None or not response.ok:
            status = response.status if response is not None else "no response"
            raise SystemExit(f"the task page answered {status}; see the logs in {BENCH_DIR}")
        await self.page.wait_for_selector('#timeline-live[data-state="live"]')

    async def arrival(self, audit_id: str, timeout: float) -> float | None:
        try:
            await self.page.wait_for_function(
                "id => window.__orbitSeen && id in window.__orbitSeen",
                arg=audit_id,
                timeout=timeout * 1000,
            )
        except Exception:
            return None
        stamp: float = await self.page.evaluate("id => window.__orbitSeen[id]", audit_id)
        return stamp / 1000

    async def stop(self) -> None:
        await self.browser.close()
        await self.playwright.stop()


# --- The measurement ----------------------------------------------------------------------------


def review_body() -> str:
    return json.dumps(
        {
            "expected_revision": "3",
            "reason": "Benchmark: the object store shows the write never happened",
            "evidence_ref": "evidence:bench",
            "execution_settled": True,
            "outcome": "FAILED",
            "result": {"confirmed": True},
        }
    )


def utc_seconds(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


async def measure(
    args: argparse.Namespace, deployment: Deployment, world: World, counts: list[int]
) -> tuple[list[Phase], dict[str, Any]]:
    base = deployment.console.url
    sessions = [await sign_in(base, name, password) for name, password in world.people]
    browser: Browser | None = None
    if not args.no_browser:
        browser = Browser(base)
        await browser.start(*world.people[0])
    api = httpx.AsyncClient(
        base_url=deployment.api.url,
        timeout=30,
        headers={"Authorization": f"Bearer {world.admin_token}"},
    )
    tasks = iter(world.tasks)
    phases: list[Phase] = []
    try:
        for count in counts:
            phase = Phase(viewers=count, load_before=loadavg())
            cpu_before, wall_before = deployment.cpu_seconds(), time.monotonic()
            rounds = args.warmup + args.events
            for index in range(rounds):
                event = index - args.warmup  # negative: warm-up, not recorded
                result = await one_round(
                    api, deployment, next(tasks), sessions, count, browser, event, args
                )
                if event >= 0:
                    phase.rounds.append(result[0])
                    phase.samples.extend(result[1])
            phase.cpu_s = {
                name: round(used - cpu_before[name], 2)
                for name, used in deployment.cpu_seconds().items()
            }
            phase.wall_s = round(time.monotonic() - wall_before, 2)
            phase.load_after = loadavg()
            phases.append(phase)
            report_phase(phase, label=results_path(args).stem.removeprefix("timeline_latency-"))
        burst = await authorisation_burst(api, world.tasks[0], max(counts))
    finally:
        await api.aclose()
        if browser is not None:
            await browser.stop()
    return phases, burst


async def authorisation_burst(api: httpx.AsyncClient, task_id: str, count: int) -> dict[str, Any]:
    """What checking authorisation on every push would cost: one call of the consumer's check
    (``GET /v1/tasks/{id}/operations?limit=1``) per viewer, all at once, as N sockets would
    make it for one event; and the same call made alone, for its unloaded cost."""
    path = f"/v1/tasks/{task_id}/operations?limit=1"

    async def timed() -> float:
        started = time.perf_counter()
        (await api.get(path)).raise_for_status()
        return (time.perf_counter() - started) * 1000

    alone = [await timed() for _ in range(20)]
    started = time.perf_counter()
    together = await asyncio.gather(*(timed() for _ in range(count)))
    wall_ms = round((time.perf_counter() - started) * 1000, 1)
    single = summary(alone)
    print(
        f"\nauthorisation check: alone p50 {single['p50']} ms; "
        f"{count} at once: all answered after {wall_ms} ms"
    )
    return {
        "viewers": count,
        "single_call_ms": single,
        "burst_wall_ms": wall_ms,
        "burst_call_ms": summary(list(together)),
    }


async def one_round(
    api: httpx.AsyncClient,
    deployment: Deployment,
    task_id: str,
    sessions: list[str],
    count: int,
    browser: Browser | None,
    event: int,
    args: argparse.Namespace,
) -> tuple[Round, list[Sample]]:
    started = time.monotonic()
    viewers, _ = await asyncio.gather(
        open_viewers(deployment.console.url, task_id, sessions, count, args.connect_spread),
        browser.open_task(task_id) if browser is not None else asyncio.sleep(0),
    )
    connect_s = time.monotonic() - started
    await asyncio.sleep(args.settle)

    sent = time.time()
    response = await api.post(
        f"/v1/tasks/{task_id}:review",
        content=review_body(),
        headers={"Content-Type": "application/json", "Idempotency-Key": secrets.token_hex(8)},
    )
    answered = time.time()
    if response.status_code != 200:
        raise SystemExit(f"review of {task_id} failed: {response.status_code} {response.text}")
    audit_id = response.json()["data"]["audit_id"]

    clients: list[tuple[str, Any]] = [(viewer.name, viewer) for viewer in viewers]
    if browser is not None:
        clients.append(("browser", browser))
    arrivals = await asyncio.gather(
        *(client.arrival(audit_id, ARRIVAL_TIMEOUT) for _name, client in clients)
    )
    await asyncio.gather(*(viewer.close() for viewer in viewers))

    detail = await api.get(f"/v1/tasks/{task_id}/operations/{audit_id}")
    created = utc_seconds(detail.json()["data"]["created_at"])
    committed = deployment.api.published_at(audit_id)
    fed = deployment.console.published_at(audit_id) if deployment.remote else None

    def since(start: float | None, at: float | None) -> float | None:
        return None if start is None or at is None else round((at - start) * 1000, 3)

    samples = [
        Sample(
            viewers=count,
            event=event,
            client=name,
            audit_id=audit_id,
            from_created_ms=since(created, at),
            from_commit_ms=since(committed, at),
            from_response_ms=since(answered, at),
            from_feed_ms=since(fed, at),
        )
        for (name, _client), at in zip(clients, arrivals, strict=True)
    ]
    record = Round(
        viewers=count,
        event=event,
        task_id=task_id,
        audit_id=audit_id,
        connect_s=round(connect_s, 3),
        settle_s=args.settle,
        review_http_ms=round((answered - sent) * 1000, 3),
        created_to_commit_ms=since(created, committed),
        created_to_response_ms=round((answered - created) * 1000, 3),
        collector_ms=deployment.collector_pauses_ms(
            created, max([at for at in arrivals if at is not None], default=answered)
        ),
        commit_to_feed_ms=since(committed, fed),
    )
    await asyncio.sleep(args.pause)
    return record, samples


# --- Reporting ----------------------------------------------------------------------------------

VIEWS = {
    "ws_from_created_ms": "ws: created_at -> arrival",
    "ws_from_commit_ms": "ws: commit -> arrival",
    "ws_from_response_ms": "ws: HTTP response -> arrival",
    "dom_from_created_ms": "browser: created_at -> DOM",
    "dom_from_commit_ms": "browser: commit -> DOM",
    "dom_from_response_ms": "browser: HTTP response -> DOM",
    "ws_from_feed_ms": "ws: feed's publish -> arrival",
    "commit_to_feed_ms": "commit -> feed's publish",
    "review_http_ms": "review HTTP round trip",
    "created_to_commit_ms": "review: created_at -> commit",
    "created_to_response_ms": "review: created_at -> response",
    "collector_ms": "GC pauses during the event",
}


def phase_summary(phase: Phase) -> dict[str, Any]:
    ws = [sample for sample in phase.samples if sample.client != "browser"]
    dom = [sample for sample in phase.samples if sample.client == "browser"]
    rounds = phase.rounds
    return {
        "viewers": phase.viewers,
        "ws_from_created_ms": summary([s.from_created_ms for s in ws]),
        "ws_from_commit_ms": summary([s.from_commit_ms for s in ws]),
        "ws_from_response_ms": summary([s.from_response_ms for s in ws]),
        "dom_from_created_ms": summary([s.from_created_ms for s in dom]),
        "dom_from_commit_ms": summary([s.from_commit_ms for s in dom]),
        "dom_from_response_ms": summary([s.from_response_ms for s in dom]),
        "ws_from_feed_ms": summary([s.from_feed_ms for s in ws]),
        "commit_to_feed_ms": summary([r.commit_to_feed_ms for r in rounds]),
        "review_http_ms": summary([r.review_http_ms for r in rounds]),
        "created_to_commit_ms": summary([r.created_to_commit_ms for r in rounds]),
        "created_to_response_ms": summary([r.created_to_response_ms for r in rounds]),
        "collector_ms": summary([r.collector_ms for r in rounds]),
        "server_cpu_s": round(sum(phase.cpu_s.values()), 2),
        "cpu_s": phase.cpu_s,
        "wall_s": phase.wall_s,
        "load_before": phase.load_before,
        "load_after": phase.load_after,
    }


def report_phase(phase: Phase, *, label: str) -> None:
    row = phase_summary(phase)
    cpu = ", ".join(f"{name} {seconds}" for name, seconds in phase.cpu_s.items())
    print(
        f"\n[{label}] N={phase.viewers} WebSocket clients (+ the browser)  "
        f"load {row['load_before']} -> {row['load_after']}  "
        f"CPU s ({cpu}) in {row['wall_s']} s"
    )
    print(f"  {'ms':<32}{'count':>6}{'lost':>5}{'p50':>8}{'p95':>8}{'p99':>8}{'max':>8}")
    for key, title in VIEWS.items():
        stats = row[key]
        if stats["count"]:
            print(
                f"  {title:<32}{stats['count']:>6}{stats['lost']:>5}{stats['p50']:>8.1f}"
                f"{stats['p95']:>8.1f}{stats['p99']:>8.1f}{stats['max']:>8.1f}"
            )
    sys.stdout.flush()


def cells(stats: dict[str, Any], names: Sequence[str]) -> str:
    if not stats["count"]:
        return " ".join(f"{'-':>7}" for _ in names)
    return " ".join(f"{stats[name]:>7.1f}" for name in names)


def results_path(args: argparse.Namespace) -> Path:
    """``timeline_latency[-remote][-<label>].json`` under ``var/bench/``."""
    parts = ["timeline_latency", "remote" if args.remote else "", args.label]
    return BENCH_DIR / ("-".join(part for part in parts if part) + ".json")


def report(
    phases: list[Phase],
    burst: dict[str, Any],
    args: argparse.Namespace,
    deployment: Deployment,
    feed: dict[str, Any] | None,
    layer: str,
    database: str,
) -> Path:
    path = results_path(args)
    mode = "remote (console + external Orbit)" if args.remote else "embedded"
    print(
        f"\n{mode}, {database}, {layer} layer; "
        "ms from created_at, last three from the commit (probe)"
    )
    print(
        f"{'N':>4} {'ws p50':>7} {'ws p95':>7} {'ws p99':>7} {'ws max':>7} {'lost':>5}"
        f" {'dom p50':>7} {'dom p99':>7} {'dom max':>7}   {'commit->ws p50/p99/max':>24}"
    )
    for phase in phases:
        row = phase_summary(phase)
        ws, dom, commit = (
            row["ws_from_created_ms"],
            row["dom_from_created_ms"],
            row["ws_from_commit_ms"],
        )
        print(
            f"{phase.viewers:>4} {cells(ws, ('p50', 'p95', 'p99', 'max'))} {ws['lost']:>5}"
            f" {cells(dom, ('p50', 'p99', 'max'))}   {cells(commit, ('p50', 'p99', 'max'))}"
        )
    if deployment.remote:
        print(f"\n{'N':>4} {'commit->feed publish p50/p95/p99/max':>38} {'feed->ws p50/p99':>18}")
        for phase in phases:
            row = phase_summary(phase)
            fed, fan = row["commit_to_feed_ms"], row["ws_from_feed_ms"]
            print(
                f"{phase.viewers:>4} {cells(fed, ('p50', 'p95', 'p99', 'max')):>38}"
                f" {cells(fan, ('p50', 'p99')):>18}   rounds not published by the feed: "
                f"{fed['lost']}"
            )
    result = {
        "command": " ".join(["uv run python", *sys.argv]),
        "machine": machine(),
        "mode": "remote" if deployment.remote else "embedded",
        "processes": {
            server.name: {"url": server.url, "log": str(server.log_path.relative_to(ROOT))}
            for server in deployment.servers
        },
        "feed_source": feed,
        "database": database,
        "channel_layer": layer,
        "events": args.events,
        "warmup": args.warmup,
        "browser": not args.no_browser,
        "commit_probe": not args.no_probe,
        "gc_freeze": args.gc_freeze,
        "connect_spread_s": args.connect_spread,
        "summary": [phase_summary(phase) for phase in phases],
        "authorisation_burst": burst,
        "rounds": [asdict(r) for phase in phases for r in phase.rounds],
        "samples": [asdict(s) for phase in phases for s in phase.samples],
    }
    path.write_text(json.dumps(result, indent=1) + "\n")
    return path


# --- Entry point --------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--viewers", default="1,10,50", help="comma-separated N (default 1,10,50)")
    parser.add_argument("--events", type=int, default=30, help="measured events per N")
    parser.add_argument("--warmup", type=int, default=2, help="unrecorded events before each N")
    parser.add_argument("--database-url", help="mysql://.../<name with 'bench'>; else SQLite")
    parser.add_argument("--redis-url", help="use the Redis channel layer at this URL")
    parser.add_argument("--no-browser", action="store_true", help="WebSocket clients only")
    parser.add_argument(
        "--no-probe",
        action="store_true",
        help="serve orbit_console.asgi as is, without bench/commit_probe.py (no commit times)",
    )
    parser.add_argument(
        "--gc-freeze",
        action="store_true",
        help="experiment: the probe calls gc.freeze() in the server once it is loaded",
    )
    parser.add_argument(
        "--connect-spread",
        type=float,
        default=5.0,
        help="open the clients evenly over this many seconds (the consumers' re-check period)",
    )
    parser.add_argument(
        "--settle", type=float, default=0.5, help="seconds between the last connect and the event"
    )
    parser.add_argument("--pause", type=float, default=0.2, help="seconds between events")
    parser.add_argument(
        "--remote",
        action="store_true",
        help="the console against an external Orbit: two processes, the console's feed",
    )
    parser.add_argument("--label", default="", help="suffix of the JSON file's name")
    args = parser.parse_args(argv)
    if args.gc_freeze and args.no_probe:
        parser.error("--gc-freeze is made by the probe: it cannot go with --no-probe")
    args.counts = [int(part) for part in args.viewers.split(",") if part.strip()]
    if not args.counts or min(args.counts) < 1 or args.events < 1:
        parser.error("--viewers needs positive counts and --events at least 1")
    return args


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    database_url = fresh_database(args.database_url, "timeline.sqlite3")
    database = "mysql" if database_url.startswith("mysql") else "sqlite"
    layer = "redis" if args.redis_url else "in-memory"
    mode = "remote" if args.remote else "embedded"
    print(
        f"timeline latency ({mode}): {database}, {layer} channel layer, N={args.counts}, "
        f"{args.events} events; load {loadavg()}"
    )
    manage(database_url, "migrate", "--noinput")
    world = build_world(
        database_url,
        people=min(max(args.counts), MAX_PEOPLE),
        tasks=(args.events + args.warmup) * len(args.counts),
    )
    if args.remote:
        deployment = serve_remote(database_url, args, world)
    else:
        deployment = serve_embedded(database_url, args)
    try:
        phases, burst = asyncio.run(measure(args, deployment, world, args.counts))
    finally:
        deployment.stop()
    feed = feed_source(world.namespace_id) if args.remote else None
    path = report(phases, burst, args, deployment, feed, layer, database)
    print(f"\nwrote {path.relative_to(ROOT)}; load {loadavg()}")


if __name__ == "__main__":
    main()
