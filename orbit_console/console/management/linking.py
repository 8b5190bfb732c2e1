"""``manage.py console link``: which accounts are one person, and the company sign-ins held for
an administrator (docs/approvals.md "One person, several accounts", docs/sign-in.md).

Accounts are named by their names, exactly (as ``console user`` and ``console signout`` name
them); a held sign-in by its id, which ``--list`` and the held person's page show. A name where
an id goes, an unknown name or id, or a name that only looks like an account's is refused with
what to type instead, and nothing changes.
"""

from typing import Any

from django.contrib.auth.models import User
from django.core.management.base import BaseCommand, CommandError

from orbit_console.lib.ids import is_id
from orbit_console.people.accounts import (
    LinkRefused,
    account_unlink,
    accounts_link,
    accounts_of,
    company_ids,
)
from orbit_console.people.models import Account
from orbit_console.people.names import collides
from orbit_console.signin.models import HeldSignin
from orbit_console.signin.services import HoldRefused, held_signin_decide

SHOWN = 60  # of a name typed: enough to recognise it, never a pasted megabyte


def shown(text: str) -> str:
    """``text`` as a command says it back: quoted, cut, control characters escaped."""
    cut = text[:SHOWN] + ("…" if len(text) > SHOWN else "")
    return ascii(cut) if not cut.isprintable() else repr(cut)


def account(name: str) -> User:
    """The account named exactly ``name``; else what to type instead."""
    found = User.objects.filter(username=name).first()
    if found is not None:
        return found
    alike = collides(name, list(User.objects.values_list("username", flat=True)))
    hint = f"; did you mean {shown(alike[0])}?" if alike else " (console user NAME makes one)"
    raise CommandError(f"no account named {shown(name)}{hint}")


def handle(command: BaseCommand, options: dict[str, Any]) -> None:
    names: list[str] = options["names"]
    by = "manage.py console link"
    if (options["same_as"] or options["apart"]) and not options["held"]:
        raise CommandError("--same-as and --apart decide a held sign-in: add --held ID")
    chosen = [bool(names), bool(options["unlink"]), bool(options["held"]), options["list"]]
    if sum(chosen) != 1:
        raise CommandError(
            "say one thing: NAME NAME, --unlink NAME, --held ID (--same-as NAME | --apart) "
            "or --list"
        )
    try:
        if options["list"]:
            _list(command)
        elif names:
            if len(names) != 2:
                raise CommandError("name two accounts: console link NAME NAME")
            one, other = account(names[0]), account(names[1])
            accounts_link(user=one, other=other, how=Account.ADMINISTRATOR, by=by)
            command.stderr.write(_person_line(one))
        elif options["unlink"]:
            one = account(options["unlink"])
            account_unlink(user=one)
            command.stderr.write(f"{one.get_username()} is a person of its own again")
        else:
            _decide(command, options, by)
    except LinkRefused as refused:
        raise CommandError(str(refused)) from None


def _decide(command: BaseCommand, options: dict[str, Any], by: str) -> None:
    held_id: str = options["held"]
    if not is_id(held_id):
        raise CommandError(
            f"{shown(held_id)} is not the id of a held sign-in (32 hexadecimal characters; "
            "console link --list shows them)"
        )
    if bool(options["same_as"]) == bool(options["apart"]):
        raise CommandError("decide the held sign-in: --same-as NAME (the same person) or --apart")
    same_as = account(options["same_as"]) if options["same_as"] else None
    try:
        made = held_signin_decide(held_id=held_id, same_as=same_as, by=by)
    except HoldRefused as refused:
        raise CommandError(f"{refused} (console link --list shows them)") from None
    if same_as is None:
        command.stderr.write(f"made {made.get_username()}: a company account, a person of its own")
    else:
        command.stderr.write(f"made {made.get_username()}: a company account; {_person_line(made)}")


def _person_line(user: User) -> str:
    ids = accounts_of(user.pk)
    names = User.objects.filter(pk__in=ids).order_by("username").values_list("username", flat=True)
    return f"one person: {', '.join(names)}"


def _list(command: BaseCommand) -> None:
    held = HeldSignin.objects.prefetch_related("matches").order_by("created_at")
    for sign_in in held:
        verified = "verified" if sign_in.email_verified else "not verified"
        alike = ", ".join(user.get_username() for user in sign_in.matches.all())
        command.stdout.write(
            f"held {sign_in.id}  {shown(sign_in.name)}  <{sign_in.email or '-'}> ({verified})  "
            f"matches: {alike}  since {sign_in.created_at:%Y-%m-%d %H:%M}"
        )
    persons: dict[str, list[int]] = {}
    for row in Account.objects.values("person", "user_id"):
        persons.setdefault(row["person"], []).append(row["user_id"])
    company = company_ids(uid for ids in persons.values() for uid in ids)
    for ids in persons.values():
        if len(ids) > 1:
            users = User.objects.filter(pk__in=ids).order_by("username")
            command.stdout.write(
                "person: "
                + ", ".join(
                    f"{u.get_username()}{' (company)' if u.pk in company else ''}" for u in users
                )
            )
