"""``manage.py reconcile``: resend submissions whose outcome is unknown until each has a
definite answer, with bounded backoff and a deadline (C9, I4). Runs as a service; ``--once``
does one pass."""

import asyncio
import signal
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from orbit_console.console.reconciler import reconcile_once


class Command(BaseCommand):
    help = "Resend submissions with an unknown outcome until they have a definite answer."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--once", action="store_true", help="one pass, then exit")
        parser.add_argument("--interval", type=float, default=2.0, help="seconds between passes")

    def handle(self, *args: Any, **options: Any) -> None:
        asyncio.run(self._run(once=options["once"], interval=options["interval"]))

    async def _run(self, *, once: bool, interval: float) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        while True:
            sent = await reconcile_once()
            if sent:
                self.stderr.write(f"reconciler: sent {sent} submission(s) again")
            if once:
                return
            try:
                await asyncio.wait_for(stop.wait(), timeout=interval)
            except TimeoutError:
                continue
            return
