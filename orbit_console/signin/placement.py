"""Where a first company sign-in belongs (docs/sign-in.md "A second account of the same
person"): whose person it is, and the name it gets.

What the provider says of a new person is compared with the console accounts already here:

- an **e-mail address the provider verified** (``email_verified`` true) that is the address of
  the accounts of exactly one person, whose name matches nothing else: the company account is
  made and **linked** to that person — four eyes treats them as one;
- a **name that looks like** an account's name (the ``preferred_username``, the address or its
  part before ``@``, compared by their confusables skeleton after case folding,
  ``people/names.py``), or an address that matches but that the provider did not verify (or
  did not say whether it did): the sign-in is **held** until an administrator decides — no
  account, no role, a page that says so;
- nothing alike: a company account of a person of its own.

Whatever happens, a company account's name is one of its own: no account's name looks like it.
"""

import re
import unicodedata
from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import User

from orbit_console.people.models import Account
from orbit_console.people.names import skeleton

_NOT_IN_NAMES = re.compile(r"[^\w.@+-]")
MAX_NAME = 140  # Django's user names hold 150: room for "-NNN"
MAX_CLAIM = 1000  # what is read of a claim at all: a provider's megabyte is not compared


@dataclass(frozen=True)
class Placement:
    link_to: User | None  # the verified address's account: linked to its person
    held_by: tuple[User, ...]  # the accounts it looks like: held for an administrator


def claim_text(claims: dict[str, Any], name: str) -> str:
    value = claims.get(name)
    return value[:MAX_CLAIM] if isinstance(value, str) else ""


def email_verified(claims: dict[str, Any]) -> bool:
    """Only a provider that says so: ``true`` (or the string some send); omitted is not."""
    return claims.get("email_verified") in (True, "true")


def wanted_name(claims: dict[str, Any]) -> str:
    """The name a company person asks for: ``preferred_username``, else the address, else
    ``sub``; NFKC-normalised as Django stores user names (a full-width name checked as typed
    and stored folded collided with the name it folds to), made of letters, digits and
    ``.@+-_`` (anything else, invisible characters included, becomes ``-``)."""
    wanted = (
        claim_text(claims, "preferred_username")
        or claim_text(claims, "email")
        or str(claims["sub"])[:MAX_CLAIM]
    )
    folded = unicodedata.normalize("NFKC", wanted)
    return _NOT_IN_NAMES.sub("-", folded)[:MAX_NAME] or "person"


def place(claims: dict[str, Any]) -> Placement:
    """Where the new company person ``claims`` belongs among the console accounts."""
    email = claim_text(claims, "email").strip().casefold()
    names = {wanted_name(claims), claim_text(claims, "preferred_username"), email}
    names.add(email.partition("@")[0] if "@" in email else "")
    looks = {skeleton(name) for name in names if name}
    local = User.objects.exclude(account__company=True).only("id", "username", "email")
    alike, same_address = [], []
    for account in local:
        if skeleton(account.get_username()) in looks:
            alike.append(account)
        if email and account.email and account.email.strip().casefold() == email:
            same_address.append(account)
    if same_address and email_verified(claims):
        persons = {_person_of(account) for account in same_address}
        everyone = {account.pk for account in [*alike, *same_address]}
        if len(persons) == 1 and all(_person_of(a) in persons for a in alike):
            return Placement(link_to=same_address[0], held_by=())
        return Placement(link_to=None, held_by=_accounts(everyone))
    matched = {account.pk for account in [*alike, *same_address]}
    return Placement(link_to=None, held_by=_accounts(matched))


def _person_of(user: User) -> str:
    account = Account.objects.filter(user=user).first()
    return account.person if account is not None else f"alone-{user.pk}"


def _accounts(ids: set[int]) -> tuple[User, ...]:
    return tuple(User.objects.filter(pk__in=ids).order_by("username"))


def name_of_its_own(wanted: str) -> str:
    """``wanted``, or ``wanted-2``, ``-3``…: the first whose skeleton no account's name has."""
    taken = {skeleton(name) for name in User.objects.values_list("username", flat=True)}
    exact = set(User.objects.filter(username__startswith=wanted).values_list("username", flat=True))
    name, n = wanted, 1
    while skeleton(name) in taken or name in exact:
        n += 1
        name = f"{wanted}-{n}"
    return name
