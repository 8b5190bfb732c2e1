"""``manage.py orbit``: operate the embedded Orbit ledger.

orbit credential --actor NAME --namespace ID [--queue ID]... --permission P...
                 [--recovery-access] [--expires-in-days N]
orbit seed
"""

import sys
from datetime import timedelta
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.utils import timezone

from orbit_console.ledger.lifecycle import CredentialError, credential_issue
from orbit_console.ledger.models import Namespace, Permission, Queue
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
        credential.add_argument("--namespace", required=True, help="namespace id")
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

    def handle(self, *args: Any, **options: Any) -> None:
        if options["command"] == "seed":
            sys.stdout.write(dumps(seed_world()) + "\n")
            return
        self._credential(options)

    def _credential(self, options: dict[str, Any]) -> None:
        namespace = Namespace.objects.filter(id=options["namespace"]).first()
        if namespace is None:
            raise CommandError(f"no namespace {options['namespace']}")
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
