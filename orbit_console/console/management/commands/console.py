"""``manage.py console user NAME --role ROLE...``: create or update a person of the console.

console user NAME --role operator [--role supervisor ...]
             [--password-file PATH]            (else a new person gets a printed password)
             [--namespace ID|NAME ...]         (embedded API: where to mint credentials)
             [--token-file PATH]               (a token issued by Orbit: checked, then stored)
             [--drop-namespace ID|NAME ...]    (take away the credential held there)
             [--email ADDRESS]                 (company sign-in with this verified address
                                                is linked to the person, docs/sign-in.md)
console signout NAME                           (end every session of the person now)
console namespaces                             (the namespaces commands know, ids and names)
console link NAME NAME                         (two accounts are one person: four eyes
                                                treats them as one, docs/approvals.md)
console link --unlink NAME                     (the account is a person of its own again)
console link --held ID --same-as NAME          (a held company sign-in is NAME's person)
console link --held ID --apart                 (a held company sign-in is someone else)
console link --list                            (held company sign-ins and linked accounts)
console objective ...                          (waiting-time objectives and the stall alarm:
                                                added by insight, docs/insight.md)

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

from orbit_console.console.management import linking
from orbit_console.console.management.linking import shown
from orbit_console.console.management.subcommands import added
from orbit_console.people.credentials import (
    TokenRefused,
    check_external_token,
    credential_drop,
    mint_embedded,
    person_roles_set,
    store_external_token,
)
from orbit_console.people.models import OrbitCredential
from orbit_console.people.names import collides
from orbit_console.people.namespaces import id_of_namespace, known_namespaces
from orbit_console.people.person import ROLES
from orbit_console.signin.logout import person_sessions_end


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
            metavar="ID|NAME",
            help="take away the person's credential in this namespace (repeatable)",
        )
        signout = commands.add_parser(
            "signout", help="end every session of a person now (their open pages too)"
        )
        signout.add_argument("name")
        commands.add_parser("namespaces", help="the namespaces commands take, by id or exact name")
        user.add_argument("--email", help="the person's e-mail address (company sign-in links)")
        link = commands.add_parser(
            "link", help="which accounts are one person (four eyes), held company sign-ins"
        )
        link.add_argument("names", nargs="*", metavar="NAME")
        link.add_argument("--unlink", metavar="NAME")
        link.add_argument("--held", metavar="ID")
        link.add_argument("--same-as", metavar="NAME")
        link.add_argument("--apart", action="store_true")
        link.add_argument("--list", action="store_true")
        user.add_argument(
            "--token-file",
            type=Path,
            help="a token issued by Orbit: stored with the scope the API says it has",
        )
        for name, subcommand in added().items():
            subcommand.add_arguments(commands.add_parser(name, help=subcommand.help))

    def handle(self, *args: Any, **options: Any) -> None:
        subcommand = added().get(options["command"])
        if subcommand is not None:
            subcommand.handle(self, options)
            return
        if options["command"] == "signout":
            self._sign_out(options["name"])
            return
        if options["command"] == "link":
            linking.handle(self, options)
            return
        if options["command"] == "namespaces":
            known = known_namespaces()
            for id_ in known:
                self.stdout.write(known.described(id_))
            return
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
        dropped = list(dict.fromkeys(map(id_of_namespace, options["drop_namespace"])))
        namespace_ids = [] if token else self._namespaces(options["namespace"], dropped)
        try:
            info = check_external_token(token) if token else None
        except TokenRefused as refused:
            raise CommandError(str(refused)) from None

        if not get_user_model().objects.filter(username=name).exists():
            alike = collides(
                name, list(get_user_model().objects.values_list("username", flat=True))
            )
            if alike:
                raise CommandError(
                    f"{shown(name)} looks like the account {shown(alike[0])}: two people must "
                    "not read alike in the record; choose another name (or name that account)"
                )
        with transaction.atomic():
            user, created = get_user_model().objects.get_or_create(username=name)
            if options["email"] is not None:
                user.email = options["email"]
                user.save(update_fields=["email"])
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

    def _sign_out(self, name: str) -> None:
        user = get_user_model().objects.filter(username=name).first()
        if user is None:
            raise CommandError(f"no person named {name!r}")
        ended = person_sessions_end(user=user)
        self.stderr.write(f"signed out {name}: {ended} session(s) ended")

    def _namespaces(self, wanted: list[str], dropped: list[str]) -> list[str]:
        """The namespaces to mint credentials in: those named (by id or by name); else the
        embedded ledger's only one, or the one the console's people already work in (the demo's);
        none if the command only takes credentials away."""
        if wanted:
            return list(dict.fromkeys(map(id_of_namespace, wanted)))
        if dropped:
            return []
        namespaces = known_namespaces()  # the embedded ledger's
        if len(namespaces) == 1:
            return list(namespaces)
        worked_in = set(OrbitCredential.objects.values_list("namespace_id", flat=True))
        chosen = [id_ for id_ in namespaces if id_ in worked_in]
        if len(chosen) == 1:
            self.stderr.write(
                f"in namespace {namespaces.described(chosen[0])}, the one the console's people "
                "hold credentials in; pass --namespace for another"
            )
            return chosen
        listing = "; ".join(map(namespaces.described, namespaces)) or "none"
        raise CommandError(f"pass --namespace (an id or a name) of the embedded ledger: {listing}")
