"""``manage.py console user NAME --role ROLE...``: create or update a person of the console.

console user NAME --role operator [--role supervisor ...]
             [--password-file PATH]            (else a new person gets a printed password)
             [--namespace ID]                  (embedded API: where to mint the credential)
             [--token-file PATH]               (a token issued by Orbit: checked, then stored)
"""

import secrets
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import transaction

from orbit_console.console.credentials import (
    TokenRefused,
    check_external_token,
    person_enroll,
    person_roles_set,
    store_external_token,
)
from orbit_console.console.people import ROLES


class Command(BaseCommand):
    help = "Manage the console's people and their Orbit credentials."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        user = commands.add_parser("user", help="create or update a person")
        user.add_argument("name")
        user.add_argument("--role", action="append", required=True, choices=ROLES)
        user.add_argument("--password-file", type=Path)
        user.add_argument("--namespace", help="embedded API: the namespace of the credential")
        user.add_argument(
            "--token-file",
            type=Path,
            help="a token issued by Orbit: stored with the scope the API says it has",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        name: str = options["name"]
        roles = frozenset(options["role"])
        password = None
        if options["password_file"]:
            password = options["password_file"].read_text().strip()
            if not password:
                raise CommandError("the password file is empty")
        token = None
        if options["token_file"]:
            token = options["token_file"].read_text().strip()
            if not token:
                raise CommandError("the token file is empty")
        elif not settings.ORBIT_API_EMBEDDED:
            raise CommandError("with an external ORBIT_API_URL, pass --token-file")
        namespace_id = None if token else self._namespace(options["namespace"])
        try:
            info = check_external_token(token) if token else None
        except TokenRefused as refused:
            raise CommandError(str(refused)) from None

        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=name)
            if password is None and created:
                password = secrets.token_urlsafe(12)
                self.stdout.write(f"password for {name}: {password}")
            if password is not None:
                user.set_password(password)
                user.save()
            if token is not None and info is not None:
                person_roles_set(user=user, roles=roles)
                store_external_token(user=user, token=token, info=info)
            elif namespace_id is not None:
                person_enroll(user=user, roles=roles, namespace_id=namespace_id)
        self.stderr.write(
            f"{'created' if created else 'updated'} {name}: {', '.join(sorted(roles))}"
        )

    def _namespace(self, wanted: str | None) -> str:
        from orbit_console.ledger.models import Namespace

        if wanted:
            if not Namespace.objects.filter(id=wanted).exists():
                raise CommandError(f"no namespace {wanted} in the embedded ledger")
            return wanted
        ids = list(Namespace.objects.values_list("id", flat=True)[:2])
        if len(ids) != 1:
            raise CommandError("pass --namespace: the embedded ledger has none or several")
        return ids[0]
