"""``manage.py console user NAME --role ROLE...``: create or update a person of the console.

console user NAME --role operator [--role supervisor ...]
             [--password-file PATH]            (else a new person gets a printed password)
             [--namespace ID ...]              (embedded API: where to mint credentials)
             [--token-file PATH]               (a token issued by Orbit: checked, then stored)
             [--drop-namespace ID ...]         (take away the credential held there)

A person holds at most one credential per namespace and sees what their credentials cover: a
credential for a namespace replaces the one held there, those of other namespaces stay.
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
    credential_drop,
    mint_embedded,
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
        user.add_argument(
            "--namespace",
            action="append",
            default=[],
            help="embedded API: a namespace to mint a credential in (repeat for several)",
        )
        user.add_argument(
            "--drop-namespace",
            action="append",
            default=[],
            metavar="ID",
            help="take away the person's credential in this namespace (repeatable)",
        )
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
        dropped: list[str] = options["drop_namespace"]
        namespace_ids = [] if token else self._namespaces(options["namespace"], dropped)
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
            else:
                person_roles_set(user=user, roles=roles)
                for namespace_id in namespace_ids:
                    mint_embedded(user=user, roles=roles, namespace_id=namespace_id)
            for namespace_id in dropped:
                if not credential_drop(user=user, namespace_id=namespace_id):
                    raise CommandError(f"{name} holds no credential in namespace {namespace_id}")
        self.stderr.write(
            f"{'created' if created else 'updated'} {name}: {', '.join(sorted(roles))}"
        )

    def _namespaces(self, wanted: list[str], dropped: list[str]) -> list[str]:
        """The namespaces to mint credentials in: those named, else the embedded ledger's only
        one (unless the command only takes credentials away)."""
        from orbit_console.ledger.models import Namespace

        if wanted:
            known = set(Namespace.objects.filter(id__in=wanted).values_list("id", flat=True))
            for namespace_id in wanted:
                if namespace_id not in known:
                    raise CommandError(f"no namespace {namespace_id} in the embedded ledger")
            return list(dict.fromkeys(wanted))
        if dropped:
            return []
        ids = list(Namespace.objects.values_list("id", flat=True)[:2])
        if len(ids) != 1:
            raise CommandError("pass --namespace: the embedded ledger has none or several")
        return ids
