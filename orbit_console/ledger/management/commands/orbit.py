"""``manage.py orbit``: operate the embedded Orbit ledger.

orbit credential --actor NAME --namespace ID|NAME [--queue ID]... --permission P...
                 [--recovery-access] [--expires-in-days N]
orbit seed
orbit work --namespace ID|NAME [--after SECONDS]
    a stand-in for Orbit's workers, for the demo: runs the new tasks that manual retries create
    (after SECONDS waiting, and as long again running), until SIGINT or SIGTERM
"""

import contextlib
import signal
import sys
import threading
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import DatabaseError, close_old_connections
from django.utils import timezone

from orbit_console.ledger.lifecycle import (
    CredentialError,
    credential_issue,
    demo_work_round,
    namespace_named,
)
from orbit_console.ledger.models import Permission, Queue
from orbit_console.ledger.seed import seed_world
from orbit_console.lib.strictjson import dumps


class Command(BaseCommand):
    help = "Operate the embedded Orbit ledger: issue credentials, seed a demo namespace."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        credential = commands.add_parser(
            "credential", help="issue a credential; prints its token once"
        )
        credential.add_argument("--actor", required=True, help="the actor's name")
        credential.add_argument("--namespace", required=True, help="an id or an exact name")
        credential.add_argument(
            "--queue", action="append", default=[], help="limit to this queue (repeatable)"
        )
        credential.add_argument(
            "--permission",
            action="append",
            default=[],
            choices=Permission.values,
            help="a permission to grant (repeatable)",
        )
        credential.add_argument(
            "--recovery-access",
            action="store_true",
            help="allow (and, with no recovery permission named, grant) review, retry and audit",
        )
        credential.add_argument("--expires-in-days", type=int, default=None)
        commands.add_parser("seed", help="create a fresh namespace with tasks in every state")
        work = commands.add_parser("work", help="the demo's worker: runs retries' new tasks")
        work.add_argument("--namespace", required=True, help="an id or an exact name")
        work.add_argument("--after", type=float, default=4.0, help="seconds before each step")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["command"] == "seed":
            sys.stdout.write(dumps(seed_world()) + "\n")
            return
        if options["command"] == "work":
            self._work(options["namespace"], timedelta(seconds=options["after"]))
            return
        self._credential(options)

    def _work(self, named: str, after: timedelta) -> None:
        namespace_id = namespace_named(named).id
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        while not stop.wait(1.0):
            with contextlib.suppress(DatabaseError):  # away: the next round tries again
                demo_work_round(namespace_id, after=after)
            close_old_connections()

    def _credential(self, options: dict[str, Any]) -> None:
        namespace = namespace_named(options["namespace"])
        queues = list(Queue.objects.filter(namespace=namespace, id__in=options["queue"]))
        if len(queues) != len(set(options["queue"])):
            raise CommandError("every --queue must be a queue of the namespace")
        if not options["permission"] and not options["recovery_access"]:
            raise CommandError("grant at least one --permission")
        days = options["expires_in_days"]
        try:
            credential, token = credential_issue(
                namespace=namespace,
                actor_name=options["actor"],
                permissions=options["permission"],
                recovery_access=options["recovery_access"],
                queues=queues,
                expires_at=timezone.now() + timedelta(days=days) if days else None,
            )
        except CredentialError as exc:
            raise CommandError(str(exc)) from None
        self.stderr.write(
            f"credential {credential.id} for actor {credential.actor_name} "
            f"({credential.actor_id}): {credential.permissions}. The token is shown once:"
        )
        sys.stdout.write(token + "\n")
