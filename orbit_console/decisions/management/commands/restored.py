"""``manage.py restored --since TIME``: after the console's database was restored from a
backup taken at TIME, list the decisions the recovery API applied since then of which this
console has no record (``decisions/restoregaps.py``; docs/runbooks.md, "Backup and restore").

The token is read from the environment variable ``--token-env`` names (default
``ORBIT_RESTORE_TOKEN``), never from the command line; it needs ``tasks:read`` and
``tasks:audit:read``. Exit status 1 when some are listed, 0 when none, 2 on an error.
"""

import asyncio
import json
import os
import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from orbit_console.client.errors import OrbitError, OutcomeUnknown
from orbit_console.decisions.restoregaps import missing_since
from orbit_console.lib.rfc3339 import format_utc, parse_utc
from orbit_console.people.person import token_client


class Command(BaseCommand):
    help = "List the decisions the recovery API applied since a backup that this console lacks."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--since",
            required=True,
            metavar="TIME",
            help="when the backup was taken (RFC 3339, e.g. 2026-12-06T04:00:00Z)",
        )
        parser.add_argument(
            "--token-env",
            default="ORBIT_RESTORE_TOKEN",
            metavar="NAME",
            help="the environment variable that holds the token (tasks:read, tasks:audit:read)",
        )
        parser.add_argument("--json", action="store_true", help="one JSON document")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            since = parse_utc(options["since"])
        except ValueError as error:
            raise CommandError(f"--since {options['since']!r}: {error}") from None
        token = os.environ.get(options["token_env"], "")
        if not token:
            raise CommandError(
                f"{options['token_env']} is not set: put a token with tasks:read and "
                "tasks:audit:read in it"
            )

        async def read() -> tuple[int, list[Any]]:
            async with token_client(token) as orbit:
                return await missing_since(orbit, since)

        try:
            applied, missing = asyncio.run(read())
        except (OrbitError, OutcomeUnknown) as error:
            raise CommandError(f"the recovery API refused or failed: {error}") from None
        if options["json"]:
            document = {
                "since": format_utc(since),
                "applied_since": applied,
                "missing": [
                    {
                        "task_id": m.task_id,
                        "action": m.action,
                        "audit_id": m.audit_id,
                        "actor_id": m.actor_id,
                        "created_at": format_utc(m.created_at),
                    }
                    for m in missing
                ],
            }
            self.stdout.write(json.dumps(document, indent=2))
        else:
            for m in missing:
                self.stdout.write(
                    f"{format_utc(m.created_at)}  {m.action}  task {m.task_id}  "
                    f"audit {m.audit_id}  by {m.actor_id}"
                )
            self.stdout.write(
                f"{applied} decision(s) applied at the recovery API since {format_utc(since)}; "
                f"{len(missing)} of them not in this console (made after the backup, or by "
                "another client of the API)"
            )
        if missing:
            sys.exit(1)
