"""``manage.py audit verify``: walk the hash chains of the platform's operation audit and of the
console's record, report the first break, and remember the result for the audit explorer.
Exits 1 when a chain is broken."""

import sys
from typing import Any

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone

from orbit_console.console import chain as console_chain
from orbit_console.console.models import ChainVerification
from orbit_console.ledger import chain as ledger_chain


class Command(BaseCommand):
    help = "Verify the audit records' hash chains."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        commands.add_parser("verify", help="walk every chain and report the first break")

    def handle(self, *args: Any, **options: Any) -> None:
        ledger_checked, ledger_break = ledger_chain.verify()
        console_checked, console_break = console_chain.verify()
        first_break = ledger_break or console_break
        checked = ledger_checked + console_checked
        ChainVerification.objects.create(
            ran_at=timezone.now(),
            ok=first_break is None,
            checked=checked,
            first_break=first_break or "",
        )
        self.stdout.write(f"ledger audit: {ledger_checked} records, {_state(ledger_break)}")
        self.stdout.write(f"console record: {console_checked} entries, {_state(console_break)}")
        if first_break is not None:
            self.stdout.write(f"first break: {first_break}")
            sys.exit(1)


def _state(first_break: str | None) -> str:
    return "intact" if first_break is None else "BROKEN"
