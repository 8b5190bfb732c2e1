"""``manage.py keys``: the last steps of rotating the console's keys (docs/runbooks.md,
"Rotating credentials").

keys retire-check [--json]   what still needs each configured key, and what to do about it;
                             exit status 1 when something is to be done now (reseal, remove an
                             old key nothing needs, put back a missing one, take an old private
                             signing key out), 0 when nothing is: the old keys left are kept
                             on purpose (audit keys, public keys) or wait for sessions to move
keys reseal                  encrypt every stored token and draft again under the first
                             ORBIT_TOKEN_KEYS key (safe to run under load, and again)
"""

import json
import sys
from dataclasses import asdict
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from orbit_console.keys.usage import UNREADABLE, reseal_all, retire_report


class Command(BaseCommand):
    help = "Check which old keys can be retired; re-encrypt stored secrets under the current key."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        check = commands.add_parser("retire-check", help="what still needs each key")
        check.add_argument("--json", action="store_true", help="one JSON document")
        commands.add_parser("reseal", help="re-encrypt stored secrets under the current key")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["command"] == "reseal":
            changed = reseal_all()
            unreadable = changed.pop(UNREADABLE)
            for what, count in changed.items():
                self.stdout.write(f"{what}: {count} re-encrypted under the current key")
            if unreadable:
                self.stdout.write(
                    f"{unreadable} stored secret(s) open with no configured key and were left "
                    "as they are: put the key that sealed them back in ORBIT_TOKEN_KEYS"
                )
                sys.exit(1)
            return
        report = retire_report()
        still_needed = [use for use in report if use.role != "current" and use.needed]
        to_do = [use for use in report if use.action]
        if options["json"]:
            document = {
                "keys": [
                    {**asdict(use), "needed": use.needed, "retirable": use.retirable}
                    for use in report
                ],
                "old_keys_still_needed": len(still_needed),
                "actions_needed": len(to_do),
            }
            self.stdout.write(json.dumps(document, indent=2))
        else:
            for use in report:
                needed = ", ".join(f"{what}: {n}" for what, n in use.needed_by.items() if n)
                self.stdout.write(
                    f"{use.kind}  key {use.key_id}  {use.role}  "
                    f"needed by: {needed or 'nothing'}"
                    + (f"  -> {use.advice}" if use.advice else "")
                )
            self.stdout.write(
                f"to do now: {len(to_do)} ({', '.join(f'{u.action} {u.key_id}' for u in to_do)})"
                if to_do
                else "nothing to do now"
                + (f"; old keys kept: {len(still_needed)}" if still_needed else "")
            )
        if to_do:
            sys.exit(1)
