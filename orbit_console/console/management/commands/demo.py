"""``manage.py demo [--port N]``: the console on its embedded default, ready to click through.

Migrates the embedded database, seeds a demo world (once; later runs reuse it), gives the demo
people fresh passwords, prints them, and serves HTTP and WebSockets with daphne, plus the
reconciler, until Ctrl-C or SIGTERM stops everything it started.
"""

import os
import secrets
import signal
import subprocess
import sys
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from orbit_console.console.credentials import person_enroll

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
        if not settings.ORBIT_API_EMBEDDED:
            raise CommandError("the demo runs on the embedded recovery API: unset ORBIT_API_URL")
        call_command("migrate", interactive=False, verbosity=0)
        namespace_id, created = self._world()
        passwords = self._people(namespace_id)
        url = f"http://{options['host']}:{options['port']}"
        self.stdout.write(
            "\nOrbit Console demo "
            + ("(new demo world)" if created else "(existing demo world)")
            + f"\n  open {url}/ and sign in as:\n"
        )
        for name, password in passwords.items():
            roles = ", ".join(sorted(PEOPLE[name]))
            self.stdout.write(f"    {name:<11} password {password}   ({roles})")
        self.stdout.write("\n  Ctrl-C stops the demo.\n")
        if not options["no_serve"]:
            self._serve(options["host"], options["port"], url)

    def _world(self) -> tuple[str, bool]:
        from orbit_console.ledger.models import Namespace

        existing = Namespace.objects.filter(name=f"{DEMO_NAMESPACE} namespace").first()
        if existing is not None:
            return existing.id, False
        from orbit_console.ledger.seed import demo_world

        return demo_world(label=DEMO_NAMESPACE), True

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

    def _serve(self, host: str, port: int, url: str) -> None:
        # The terminal stays readable: warnings and errors only, unless LOG_LEVEL says otherwise.
        env = {"LOG_LEVEL": "WARNING", **os.environ, "ORBIT_EMBEDDED_API_URL": url}
        manage = [sys.executable, str(settings.BASE_DIR / "manage.py")]
        # Fixed argument lists of this interpreter and this checkout: nothing untrusted.
        children = [
            subprocess.Popen(  # noqa: S603
                [
                    sys.executable,
                    "-m",
                    "daphne",
                    "-v",
                    "0",
                    "-b",
                    host,
                    "-p",
                    str(port),
                    "orbit_console.asgi:application",
                ],
                env=env,
                cwd=settings.BASE_DIR,
            ),
            subprocess.Popen([*manage, "reconcile"], env=env, cwd=settings.BASE_DIR),  # noqa: S603
        ]

        def stop(signum: int, frame: object) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        try:
            while all(child.poll() is None for child in children):
                try:
                    children[0].wait(timeout=1)
                except subprocess.TimeoutExpired:
                    continue
        except KeyboardInterrupt:
            pass
        finally:
            for child in children:
                if child.poll() is None:
                    child.terminate()
            for child in children:
                try:
                    child.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    child.kill()
            self.stdout.write("Orbit Console demo stopped.")
