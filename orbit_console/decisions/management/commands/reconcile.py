"""``manage.py reconcile``: resend submissions whose outcome is unknown until each has a
definite answer, with bounded backoff and a deadline (C9, I4). Runs as a service that outlives
a failing pass (issue 14); ``--once`` does one pass, then sends what batches have due.

Beside the passes it runs the batch worker (decisions/batchworker.py) when it is the
reconciler's to run (``sends_here``: by default when the processes share a channel layer, so
its pushes reach every server's sockets; with the in-memory layer the server process runs it).
``--batches`` and ``--no-batches`` say so explicitly."""

import argparse
import asyncio
import logging
import signal
from typing import Any

from asgiref.sync import sync_to_async
from django.core.management.base import BaseCommand, CommandParser
from django.db import close_old_connections

from orbit_console.decisions.batchworker import run_batches, sends_here, work_batches
from orbit_console.decisions.reconciler import reconcile_once
from orbit_console.ops.loops import Heartbeat, serve_health

logger = logging.getLogger("orbit.console.reconciler")
# After a failed pass the reconciler waits longer each time, never more than this: it is back
# at work within this long of a fault's end.
MAX_BACKOFF = 30.0


class Command(BaseCommand):
    help = "Resend submissions with an unknown outcome until they have a definite answer."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="one pass, then exit")
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between passes")
        parser.add_argument(
            "--health-port",
            type=int,
            default=0,
            help="answer /health/live, /health/ready and /metrics on this port (ops/loops.py)",
        )
        parser.add_argument(
            "--batches",
            action=argparse.BooleanOptionalAction,
            default=None,
            help="send batches' items (default: when the channel layer is shared, not in-memory)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        interval = options["interval"]
        # Stalled: no pass has succeeded for longer than the longest pause after failures
        # allows, with room for two passes.
        heartbeat = Heartbeat("reconciler", stale_after=MAX_BACKOFF + 3 * interval)
        if options["health_port"]:
            serve_health(heartbeat, options["health_port"])
        batches = options["batches"]
        if batches is None:
            batches = options["once"] or sends_here("reconciler")
        asyncio.run(
            self._run(once=options["once"], batches=batches, interval=interval, heartbeat=heartbeat)
        )

    async def _run(
        self, *, once: bool, batches: bool, interval: float, heartbeat: Heartbeat
    ) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        if once:
            await self._reconcile(once=True, interval=interval, heartbeat=heartbeat, stop=stop)
            while batches and await work_batches():
                pass
            return
        worker = asyncio.create_task(run_batches(stop)) if batches else None
        try:
            await self._reconcile(once=False, interval=interval, heartbeat=heartbeat, stop=stop)
        finally:
            stop.set()
            if worker is not None:
                await worker

    async def _reconcile(
        self, *, once: bool, interval: float, heartbeat: Heartbeat, stop: asyncio.Event
    ) -> None:
        failures = 0
        while True:
            try:
                sent = await reconcile_once()
            except Exception as error:
                heartbeat.failed(error)
                # A fault of this pass (the database away, a lost connection): log it, wait a
                # little longer each time (at most MAX_BACKOFF), and go on. Nothing is lost:
                # what was due stays due.
                failures += 1
                pause = min(interval * 2**failures, MAX_BACKOFF)
                logger.exception("reconciler: a pass failed; next in %.0fs", pause)
                if once:
                    raise
            else:
                heartbeat.beat()
                failures, pause = 0, interval
                if sent:
                    self.stderr.write(f"reconciler: sent {sent} submission(s) again")
                if once:
                    return
            # As at the end of a request: a connection that failed, or is due to retire (a
            # privilege error, ops/database.py), is closed; the next pass opens a fresh one.
            await sync_to_async(close_old_connections)()
            try:
                await asyncio.wait_for(stop.wait(), timeout=pause)
            except TimeoutError:
                continue
            return
