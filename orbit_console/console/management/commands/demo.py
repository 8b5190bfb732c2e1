"""``manage.py demo [--port N]``: the console on its embedded default, ready to click through.

Migrates the embedded database, seeds a demo world (once; later runs reuse it), gives the demo
people fresh passwords, prints them, and serves HTTP and WebSockets (``manage.py serve`` with
one worker: the in-memory channel layer serves one process), plus the reconciler, the
notifications' delivery worker (`notify deliver`), the audit
checkpoint job and a stand-in for Orbit's workers that runs retries' new tasks, until Ctrl-C or
SIGTERM stops everything it started. A child that exits is started again. The console consumes
the demo namespace's event stream (``manage.py feed``).
"""

import io
import logging
import os
import secrets
import sys
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from orbit_console.ops.supervisor import Child, Supervisor
from orbit_console.people.credentials import person_enroll

DEMO_NAMESPACE = "Orbit demo"
PEOPLE = {
    "operator": frozenset({"operator"}),
    "supervisor": frozenset({"supervisor"}),
    "auditor": frozenset({"auditor"}),
}


class Command(BaseCommand):
    help = "Run the console on the embedded defaults with demo people and tasks."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--port", type=int, default=8000)
        parser.add_argument("--host", default="127.0.0.1")
        parser.add_argument(
            "--no-serve", action="store_true", help="prepare the demo, print it, and exit"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            self._run(options)
        except KeyboardInterrupt:
            # Ctrl-C before the children run (while migrating or seeding): a line, no traceback.
            self.stdout.write("\nOrbit Console demo stopped.")

    def _run(self, options: dict[str, Any]) -> None:
        if not settings.ORBIT_API_EMBEDDED:
            raise CommandError("the demo runs on the embedded recovery API: unset ORBIT_API_URL")
        call_command("migrate", interactive=False, verbosity=0)
        namespace_id, created = self._world()
        if created:
            self._set_aside_old_checkpoints()
        self._feed(namespace_id)
        passwords = self._people(namespace_id)
        url = f"http://{options['host']}:{options['port']}"
        self.stdout.write(
            "\nOrbit Console demo "
            + ("(new demo world)" if created else "(existing demo world)")
            + f"\n  open {url}/ and sign in as:\n"
        )
        self._print_people(passwords)
        if not options["no_serve"]:
            # What the children print while they start would scroll the people away: they are
            # printed again, last, once the console answers.
            threading.Thread(target=self._people_again, args=(url, passwords), daemon=True).start()
            self._serve(options["host"], options["port"], namespace_id)

    def _print_people(self, passwords: dict[str, str]) -> None:
        for name, password in passwords.items():
            roles = ", ".join(sorted(PEOPLE[name]))
            self.stdout.write(f"    {name:<11} password {password}   ({roles})")
        self.stdout.write("\n  Ctrl-C stops the demo.\n")

    def _people_again(self, url: str, passwords: dict[str, str]) -> None:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                with urllib.request.urlopen(f"{url}/health/live", timeout=2):  # noqa: S310 -- our own http URL
                    break
            except OSError:
                time.sleep(0.5)
        else:
            return
        time.sleep(1)  # the children's first lines come with the first answer
        self.stdout.write(f"\nOrbit Console demo ready at {url}/ — sign in as:\n")
        self._print_people(passwords)

    def _world(self) -> tuple[str, bool]:
        from orbit_console.ledger.models import Namespace

        existing = Namespace.objects.filter(name=f"{DEMO_NAMESPACE} namespace").first()
        if existing is not None:
            return existing.id, False
        from orbit_console.ledger.seed import demo_world

        return demo_world(label=DEMO_NAMESPACE), True

    def _feed(self, namespace_id: str) -> None:
        """The console consumes the demo namespace's event stream (docs/events.md), so that
        decisions are followed to their end as they would be in production."""
        from orbit_console.feed.models import Source

        if not Source.objects.filter(namespace_id=namespace_id).exists():
            logging.disable(logging.INFO)  # the terminal shows the demo, not the API's log
            try:
                call_command(
                    "feed",
                    "add",
                    "--namespace",
                    namespace_id,
                    "--label",
                    "orbit-console-demo",
                    stdout=io.StringIO(),
                )
            finally:
                logging.disable(logging.NOTSET)

    def _set_aside_old_checkpoints(self) -> None:
        """A new demo world is a new database: checkpoints of an earlier one (a deleted
        ``var/orbit.sqlite3``) would rightly report all its chains as removed. Keep them, out
        of the way."""
        folder = Path(settings.ORBIT_AUDIT_CHECKPOINT_DIR)
        if folder.is_dir() and any(folder.glob("*.json")):
            aside = folder.with_name(f"{folder.name}.before-{int(time.time())}")
            folder.rename(aside)
            self.stdout.write(f"  (checkpoints of an earlier demo database kept in {aside})")

    @transaction.atomic
    def _people(self, namespace_id: str) -> dict[str, str]:
        passwords = {}
        for name, roles in PEOPLE.items():
            user, _ = get_user_model().objects.get_or_create(username=name)
            password = secrets.token_urlsafe(9)
            user.set_password(password)
            user.save()
            person_enroll(user=user, roles=roles, namespace_id=namespace_id)
            passwords[name] = password
        return passwords

    def _serve(self, host: str, port: int, namespace_id: str) -> None:
        # The terminal stays readable: warnings and errors only, unless LOG_LEVEL says otherwise.
        env = {"LOG_LEVEL": "WARNING", **os.environ}
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        address = ["--bind", f"{host}:{port}", "--workers", "1"]
        children = [
            Child("server", [*manage, "serve", *address]),
            Child("reconciler", [*manage, "reconcile"]),
            Child("notifier", [*manage, "notify", "deliver"]),
            Child("checkpointer", [*manage, "audit", "-v", "0", "checkpoint", "--every"]),
            # A stand-in for Orbit's workers: retries' new tasks run, so that their follow-ups
            # reach an end (docs/events.md).
            Child("worker", [*manage, "orbit", "work", "--namespace", namespace_id]),
        ]
        Supervisor(children, env=env, cwd=settings.BASE_DIR).run()
        self.stdout.write("Orbit Console demo stopped.")
