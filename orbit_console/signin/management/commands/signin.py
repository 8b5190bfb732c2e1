"""``manage.py signin``: company sign-in, as an administrator sets it up (docs/sign-in.md).

signin check   what will fail at the provider with the settings as they are: the discovery
               document, the issuer, the keys, the client's credentials, the sign-in and step-up
               requests (scopes, prompt, redirect URI), the claims the rules read, the namespaces
               they name, and which logout the provider offers. One line per finding (ok, note,
               FAIL); exit status 1 when anything will fail. Nothing is signed in or changed.
"""

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from orbit_console.signin.check import FAIL, check


class Command(BaseCommand):
    help = "Check company sign-in's settings against the identity provider."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        commands.add_parser("check", help="what will fail at the provider, and what to change")

    def handle(self, *args: Any, **options: Any) -> None:
        findings = check()
        for finding in findings:
            self.stdout.write(str(finding))
        failed = sum(finding.level == FAIL for finding in findings)
        if failed:
            self.stdout.write(f"{failed} check(s) will fail: company sign-in will not work as set")
            sys.exit(1)
        self.stdout.write("company sign-in: nothing will fail")
