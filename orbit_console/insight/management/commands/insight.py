"""``manage.py insight``: the insight rollups against the facts they are kept from
(docs/insight.md).

insight check [--namespace NS ...]     recompute the rollups from the facts and compare (exit 1
                                       on a difference, listing the first ones)
insight rebuild [--namespace NS ...]   write the rollups afresh from the facts (run it while no
                                       decision is being made: a restore, a bucket change)
"""

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from orbit_console.insight import tallies

SHOWN = 20


class Command(BaseCommand):
    help = "Check or rebuild the insight rollups from the facts they are kept from."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="command", required=True)
        for name in ("check", "rebuild"):
            verb = sub.add_parser(name)
            verb.add_argument("--namespace", action="append", default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        namespaces = options["namespace"]
        if options["command"] == "rebuild":
            rows = tallies.rebuild(namespaces)
            self.stdout.write(f"rebuilt: {rows} rollup rows")
            return
        expected = tallies.recompute(namespaces)
        found = tallies.stored(namespaces)
        wrong = sorted(
            (key for key in expected.keys() | found.keys() if expected[key] != found[key]),
            key=lambda key: (key[0], key[1]),
        )
        if not wrong:
            self.stdout.write(f"ok: {len(expected)} rollup rows equal the facts")
            return
        for table, key in wrong[:SHOWN]:
            stored, fresh = found[table, key], expected[table, key]
            self.stdout.write(f"{table} {key}: stored {stored}, the facts make {fresh}")
        raise CommandError(f"{len(wrong)} rollup rows differ from the facts")
