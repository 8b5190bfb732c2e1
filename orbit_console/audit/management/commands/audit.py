"""``manage.py audit``: the tamper evidence of the audit records (docs/audit.md).

- ``audit verify`` walks every chain, holds it against the signed checkpoints, reports every
  problem by name, signs the result for the audit explorer (where it holds the signing key),
  and exits 1 on any problem.
- ``audit checkpoint`` signs and writes one checkpoint of the chains' heads now;
  ``audit checkpoint --every SECONDS`` is the periodic job, which writes one whenever a head
  moved (and at least hourly) until SIGTERM. Neither starts a new series over checkpoints the
  database lists as written; ``audit checkpoint --new-series REASON`` does, in an empty folder,
  and signs the reason and the series it gives up into its first checkpoint.
- ``audit declare-restore --checkpoint N | --taken-at TIME --reason TEXT`` declares, signed,
  that the database was restored from a backup holding checkpoint N (or taken at TIME):
  ``audit verify`` then names the rewind as a declared restore, not as tampering
  (``audit/restores.py``).
- ``audit public-key`` prints the public keys of the signing keys, for
  ``ORBIT_AUDIT_VERIFY_KEYS`` wherever checkpoints are verified without the private key.
"""

import argparse
import logging
import re
import signal
import sys
import threading
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import close_old_connections
from django.utils import timezone

from orbit_console.audit import checkpoints, restores, signing, status
from orbit_console.audit.verify import verify
from orbit_console.lib.rfc3339 import format_utc, parse_utc
from orbit_console.ops.loops import Heartbeat, serve_health

SHOWN_PROBLEMS = 20
logger = logging.getLogger("orbit.audit")


class Command(BaseCommand):
    help = "Verify the audit chains, or write a signed checkpoint of their heads."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        commands.add_parser("verify", help="check every chain and the checkpoints")
        checkpoint = commands.add_parser("checkpoint", help="sign and write the chains' heads")
        checkpoint.add_argument(
            "--every",
            type=float,
            nargs="?",
            const=float(settings.ORBIT_AUDIT_CHECKPOINT_SECONDS),
            metavar="SECONDS",
            help="keep running: look for moved heads every SECONDS (without a number: "
            "ORBIT_AUDIT_CHECKPOINT_SECONDS, now "
            f"{settings.ORBIT_AUDIT_CHECKPOINT_SECONDS})",
        )
        checkpoint.add_argument(
            "--new-series",
            metavar="REASON",
            help="start a new series in an empty folder, giving up the series the database "
            "lists (their folder is lost for good); the reason is signed into its first "
            "checkpoint (docs/audit.md)",
        )
        checkpoint.add_argument(
            "--complete",
            action="store_true",
            help="sign every chain's head, not only those marked as moved (after verify named "
            "a chain whose mark was removed)",
        )
        checkpoint.add_argument(
            "--health-port",
            type=int,
            default=0,
            help="with --every: answer /health/live, /health/ready and /metrics on this port",
        )
        declare = commands.add_parser(
            "declare-restore",
            help="declare, signed, that the database was restored from a backup (docs/audit.md)",
        )
        point = declare.add_mutually_exclusive_group(required=True)
        point.add_argument(
            "--checkpoint",
            type=checkpoint_number,
            metavar="N",
            help="the newest checkpoint the backup holds",
        )
        point.add_argument(
            "--taken-at",
            metavar="TIME",
            help="when the backup was taken (RFC 3339, e.g. 2026-12-06T05:00:00Z): the newest "
            "checkpoint taken at or before it",
        )
        declare.add_argument("--reason", required=True, help="why, signed into the record")
        commands.add_parser("public-key", help="print the signing keys' public keys")

    def handle(self, *args: Any, **options: Any) -> None:
        # ``-v 0``: no line per checkpoint written (the demo's terminal shows its people).
        self.verbosity = options["verbosity"]
        if options["command"] == "verify":
            self._verify()
        elif options["command"] == "declare-restore":
            self._declare_restore(options)
        elif options["command"] == "public-key":
            for key in signing.public_keys():
                self.stdout.write(key)
        elif options["every"] is None:
            self._checkpoint(
                force=True, new_series=options["new_series"], complete=options["complete"]
            )
        elif options["new_series"] is not None or options["complete"]:
            raise CommandError("--new-series and --complete write one checkpoint: not with --every")
        else:
            self._periodically(options["every"], options["health_port"])

    def _verify(self) -> None:
        report = verify(checkpoints.read())
        problems = report.problems
        recorded = status.record(report, timezone.now())
        for family in report.families:
            state = "BROKEN" if family.problems else "intact"
            self.stdout.write(f"{family.title}: {family.checked} {family.unit}, {state}")
        for line in _checkpoints_lines(report.checkpoints):
            self.stdout.write(line)
        if recorded is None:
            self.stdout.write(
                "result: not recorded for the console (no signing key here, "
                "ORBIT_AUDIT_SIGNING_KEYS: the console shows signed results only)"
            )
        if problems:
            self.stdout.write(f"first break: {problems[0]}")
            self.stdout.write(f"problems: {len(problems)}")
            for problem in problems[:SHOWN_PROBLEMS]:
                self.stdout.write(f"  - {problem}")
            if len(problems) > SHOWN_PROBLEMS:
                self.stdout.write(f"  ... and {len(problems) - SHOWN_PROBLEMS} more")
            sys.exit(1)

    def _declare_restore(self, options: dict[str, Any]) -> None:
        taken_at = None
        if options["taken_at"] is not None:
            try:
                taken_at = parse_utc(options["taken_at"])
            except ValueError as error:
                raise CommandError(f"--taken-at {options['taken_at']!r}: {error}") from None
        try:
            declared = restores.declare(
                reason=options["reason"], to=options["checkpoint"], taken_at=taken_at
            )
        except checkpoints.CheckpointError as error:
            raise CommandError(str(error)) from None
        written = declared.checkpoint
        earlier = [c.number for c in declared.rewound if c.restore is not None]
        again = (
            f" (the declared restore of {restores.spans(earlier)} among them)" if earlier else ""
        )
        self.stdout.write(
            f"checkpoint {written.number} written to {written.path}: declares the database "
            f"restored from a backup holding checkpoint {declared.to.number} (of "
            f"{format_utc(declared.to.taken_at)}); set aside as rewound: "
            f"{restores.spans(restores.numbers(declared.rewound))}{again}; signed with key "
            f"{written.key_id}"
        )

    def _checkpoint(
        self, *, force: bool, new_series: str | None = None, complete: bool = False
    ) -> None:
        try:
            written = checkpoints.write(force=force, new_series=new_series, complete=complete)
        except checkpoints.CheckpointError as error:
            raise CommandError(str(error)) from None
        if written is not None and self.verbosity:
            moved = sum(len(heads) for heads in written.heads.values())
            self.stdout.write(
                f"checkpoint {written.number} written to {written.path} "
                f"({moved} head(s) moved, signed with key {written.key_id})"
            )
            if new_series is not None:
                self.stdout.write(f"a new series, {written.series}: {_given_up(written)}")

    def _periodically(self, seconds: float, health_port: int) -> None:
        heartbeat = Heartbeat("audit-checkpoint", stale_after=3 * seconds + 60)
        if health_port:
            serve_health(heartbeat, health_port)
        stop = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: stop.set())
        while not stop.is_set():
            try:
                self._checkpoint(force=False)
            except Exception as error:  # one round's fault (database, disk, folder): try again
                heartbeat.failed(error)
                logger.exception("audit checkpoint: this round failed; again in %ss", seconds)
                close_old_connections()
            else:
                heartbeat.beat()
            stop.wait(seconds)


def checkpoint_number(text: str) -> int:
    """A checkpoint's number as its file names it: ASCII decimal digits, at most the file
    name's eight; no sign, no spaces (``int()`` alone takes " +1_0", and Arabic-Indic
    digits)."""
    if not re.fullmatch(rf"[0-9]{{1,{checkpoints.NAME_DIGITS}}}", text):
        raise argparse.ArgumentTypeError(
            f"{text[:40]!r} is not a checkpoint's number (1 to {checkpoints.NAME_DIGITS} digits)"
        )
    return int(text)


def _checkpoints_lines(reading: checkpoints.Reading) -> list[str]:
    state = "BROKEN" if reading.problems else "intact"
    if not reading.checkpoints:
        if reading.problems:
            return [f"checkpoints: none readable in {checkpoints.folder()}, BROKEN"]
        return [
            f"checkpoints: none yet in {checkpoints.folder()} (run 'manage.py audit checkpoint')"
        ]
    newest = reading.checkpoints[-1]
    lines = [
        f"checkpoints: {len(reading.checkpoints)}, the newest {newest.number} of "
        f"{format_utc(newest.taken_at)}, {state}"
    ]
    lines.extend(
        f"checkpoints: {restores.describe(declaration, reading)}"
        for declaration in reading.restores
    )
    if (first := reading.started_over) is not None:
        lines.append(
            f"checkpoints: this series was started over lost ones on "
            f"{format_utc(first.taken_at)}: {_given_up(first)}"
        )
    return lines


def _given_up(first: checkpoints.Checkpoint) -> str:
    given_up = ", ".join(f"series {g.series} (to checkpoint {g.number})" for g in first.gives_up)
    return f"gives up {given_up or 'no series'}; reason: {first.reason}"
