"""``manage.py feed``: the console's feed of Orbit's event stream (docs/events.md).

feed add --token-file PATH [--subscription ID] [--label TEXT]
    consume a subscription with a token issued by Orbit (events:subscribe, tasks:read and,
    against an external Orbit, tasks:audit:read): the one named, or a new one of the token's
    namespace (created once: adding again answers the same subscription)
feed add --namespace ID|NAME [--label TEXT]
    the embedded API only: mint the feed's own credential in the namespace, then as above
feed list
    the subscriptions consumed and what is known of each stream: its status (live, stalled,
    down, ...) since when and why, and how many of its events were set aside
feed set-aside [--limit N]
    the events set aside most recently (acknowledged without being applied), newest first
feed run [--health-port PORT]
    be a candidate to consume, in the foreground, until SIGINT or SIGTERM (server processes are
    candidates already unless CONSOLE_FEED=off); with --health-port, answer /health/live,
    /health/ready (503 once the lease could not be read for three leases and a minute) and
    /metrics on that port, for the orchestrator's probes
"""

import asyncio
import signal
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count, Max

from orbit_console.client import OrbitError, OutcomeUnknown
from orbit_console.feed.consumer import run_feed
from orbit_console.feed.models import SetAsideEvent, Source, SourceStatus
from orbit_console.feed.sources import source_add
from orbit_console.ops.loops import Heartbeat, serve_health

FEED_PERMISSIONS = ["tasks:read", "tasks:audit:read", "events:subscribe"]


class Command(BaseCommand):
    help = "Consume Orbit's event stream: add a subscription, list them, or run a consumer."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        add = commands.add_parser("add", help="consume a subscription")
        whose = add.add_mutually_exclusive_group(required=True)
        whose.add_argument("--token-file", type=Path, help="a token issued by Orbit")
        whose.add_argument(
            "--namespace", help="embedded API: mint the feed's credential here (an id or a name)"
        )
        add.add_argument("--subscription", default="", help="an existing subscription's id")
        add.add_argument("--label", default="orbit-console")
        commands.add_parser("list", help="the subscriptions consumed")
        aside = commands.add_parser("set-aside", help="the events set aside, newest first")
        aside.add_argument("--limit", type=int, default=20)
        run = commands.add_parser("run", help="a candidate consumer in the foreground")
        run.add_argument(
            "--health-port",
            type=int,
            default=0,
            help="answer /health/live, /health/ready and /metrics on this port",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        command = options["command"]
        if command == "add":
            self._add(options)
        elif command == "list":
            self._list()
        elif command == "set-aside":
            self._set_aside(options["limit"])
        else:
            asyncio.run(self._run(options["health_port"]))

    def _list(self) -> None:
        aside = {
            row["source_id"]: row
            for row in SetAsideEvent.objects.values("source_id").annotate(
                n=Count("id"), last=Max("set_aside_at")
            )
        }
        for source in Source.objects.order_by("namespace_id"):
            when = source.status_at.isoformat() if source.status_at else "-"
            self.stdout.write(
                f"{source.namespace_id} {source.subscription_id} {source.status} {when} "
                f"{source.label}"
            )
            if source.status != SourceStatus.LIVE and source.status_note:
                self.stdout.write(f"  why: {_line(source.status_note)}")
            if found := aside.get(source.id):
                self.stdout.write(
                    f"  set aside: {found['n']} event(s), the last at "
                    f"{found['last'].isoformat()} (feed set-aside)"
                )

    def _set_aside(self, limit: int) -> None:
        for event in SetAsideEvent.objects.order_by("-set_aside_at")[: max(limit, 1)]:
            self.stdout.write(
                f"{event.set_aside_at.isoformat()} {event.reason} "
                f"event={event.event_id or '-'} task={event.task_id or '-'} "
                f"type={event.event_type or '-'} delivery={event.attempt}: {_line(event.detail)}"
            )

    def _add(self, options: dict[str, Any]) -> None:
        if options["token_file"]:
            token = options["token_file"].read_text().strip()
            if not token:
                raise CommandError("the token file is empty")
        else:
            token = self._mint(options["namespace"], options["label"])
        try:
            source = asyncio.run(
                source_add(
                    token=token, label=options["label"], subscription_id=options["subscription"]
                )
            )
        except OrbitError as refused:
            hint = " (E1: this Orbit has no event stream)" if refused.status == 404 else ""
            raise CommandError(f"the API refused: {refused}{hint}") from None
        except OutcomeUnknown as unknown:
            raise CommandError(f"the API did not answer: {unknown}") from None
        self.stdout.write(
            f"consuming subscription {source.subscription_id} of {source.namespace_id}"
        )

    def _mint(self, namespace: str, label: str) -> str:
        if not settings.ORBIT_API_EMBEDDED:
            raise CommandError("with an external ORBIT_API_URL, pass --token-file")
        from orbit_console.ledger.lifecycle import (
            CredentialError,
            credential_issue,
            namespace_named,
        )

        found = namespace_named(namespace)
        try:
            _, token = credential_issue(
                namespace=found,
                actor_name=label,
                permissions=FEED_PERMISSIONS,
                recovery_access=True,
            )
        except CredentialError as refused:
            raise CommandError(str(refused)) from None
        return token

    async def _run(self, health_port: int) -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop.set)
        heartbeat = Heartbeat("feed", stale_after=3 * settings.CONSOLE_FEED_LEASE_SECONDS + 60)
        if health_port:
            serve_health(heartbeat, health_port)
        await run_feed(stop, heartbeat=heartbeat)


def _line(text: str) -> str:
    """What the Orbit said, on one line, without the control characters a terminal obeys."""
    return "".join(c if c.isprintable() else " " for c in text)[:500]
