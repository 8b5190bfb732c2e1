"""One person, several accounts (docs/approvals.md): which accounts are the same human being,
linking and unlinking them, and which accounts company sign-in made (marked wherever a person
is named).

A person may hold a console account and a company account, or two company accounts: four eyes
is judged per person, so ``accounts_of`` (the proposer's accounts) is what approving and
rejecting refuse. Links only ever take abilities away — linked accounts keep their own names,
roles and credentials — so linking on good evidence (an e-mail address the provider verified)
is safe to do at sign-in; everything less certain waits for an administrator
(``signin/placement.py``).
"""

from collections.abc import Iterable

from django.contrib.auth.models import User
from django.db import transaction
from django.db.models import Subquery
from django.utils import timezone
from django.utils.translation import gettext as _

from orbit_console.lib.ids import new_id
from orbit_console.people.models import Account

COMPANY_KNOWN = "_orbit_company"  # set on a User: whether it is a company account, once known


class LinkRefused(Exception):
    """The accounts cannot be linked or unlinked as asked; the message says why."""


def accounts_of(user_id: int) -> frozenset[int]:
    """The ids of every account of the person ``user_id`` belongs to, itself included."""
    # "= (SELECT ... LIMIT 1)": MariaDB takes no LIMIT in an IN subquery.
    person = Subquery(Account.objects.filter(user_id=user_id).values("person")[:1])
    linked = Account.objects.filter(person=person).values_list("user_id", flat=True)
    return frozenset({user_id, *linked})


def linked_accounts(user: User) -> list[Account]:
    """The person's other accounts, with how each joined (the person page)."""
    mine = Account.objects.filter(user=user).first()
    if mine is None:
        return []
    others = Account.objects.filter(person=mine.person).exclude(user=user)
    return list(others.select_related("user").order_by("user__username"))


@transaction.atomic
def account_company(*, user: User) -> Account:
    """Mark ``user`` as made by company sign-in (in its sign-in's transaction)."""
    account, _created = Account.objects.get_or_create(
        user=user, defaults={"person": new_id(), "company": True}
    )
    if not account.company:
        account.company = True
        account.save(update_fields=["company"])
    setattr(user, COMPANY_KNOWN, True)
    return account


@transaction.atomic
def accounts_link(*, user: User, other: User, how: str, by: str) -> None:
    """``user`` and ``other`` are one person from now on, and so are the accounts either was
    already linked with. ``how``: ``Account.EMAIL`` or ``Account.ADMINISTRATOR``; ``by``: who
    decided (an administrator's name, or the provider)."""
    if user.pk == other.pk:
        raise LinkRefused(_("An account is already its own person: name another account."))
    rows = {
        row.user_id: row
        for row in Account.objects.select_for_update().filter(user_id__in=[user.pk, other.pk])
    }
    if user.pk in rows and other.pk in rows and rows[user.pk].person == rows[other.pk].person:
        raise LinkRefused(
            _("%(one)s and %(other)s are already one person.")
            % {"one": user.get_username(), "other": other.get_username()}
        )
    kept = rows[other.pk].person if other.pk in rows else new_id()
    now = timezone.now()
    if user.pk in rows:  # the accounts already linked with ``user`` come along
        Account.objects.filter(person=rows[user.pk].person).update(person=kept)
    for account in (user, other):
        if account.pk not in rows:
            Account.objects.create(user=account, person=kept)
    Account.objects.filter(user_id=user.pk).update(
        person=kept, linked_how=how, linked_by=by[:150], linked_at=now
    )


@transaction.atomic
def account_unlink(*, user: User) -> None:
    """``user`` is a person of its own again (an administrator found the link wrong)."""
    mine = Account.objects.select_for_update().filter(user=user).first()
    if mine is None or len(accounts_of(user.pk)) == 1:
        raise LinkRefused(
            _("%(name)s is linked to no other account.") % {"name": user.get_username()}
        )
    mine.person, mine.linked_how, mine.linked_by, mine.linked_at = new_id(), "", "", None
    mine.save(update_fields=["person", "linked_how", "linked_by", "linked_at"])


# --- Company accounts, marked wherever a person is named ----------------------------------------


def company_ids(user_ids: Iterable[int | None]) -> frozenset[int]:
    """Those of ``user_ids`` that company sign-in made, in one query."""
    wanted = {user_id for user_id in user_ids if user_id is not None}
    if not wanted:
        return frozenset()
    found = Account.objects.filter(user_id__in=wanted, company=True)
    return frozenset(found.values_list("user_id", flat=True))


def company_names(names: Iterable[str]) -> frozenset[str]:
    """Those of the account names ``names`` that company sign-in made, in one query."""
    wanted = {name for name in names if name}
    if not wanted:
        return frozenset()
    found = Account.objects.filter(user__username__in=wanted, company=True)
    return frozenset(found.values_list("user__username", flat=True))


def mark_company(users: Iterable[User | None]) -> None:
    """Learn, in one query, which of ``users`` are company accounts (``is_company`` then asks
    nothing more): for pages that name many people."""
    shown = [user for user in users if user is not None and not hasattr(user, COMPANY_KNOWN)]
    found = company_ids(user.pk for user in shown)
    for user in shown:
        setattr(user, COMPANY_KNOWN, user.pk in found)


def is_company(user: User | None) -> bool:
    if user is None:
        return False
    known = getattr(user, COMPANY_KNOWN, None)
    if known is None:
        known = Account.objects.filter(user_id=user.pk, company=True).exists()
        setattr(user, COMPANY_KNOWN, known)
    return bool(known)


def marked(name: str, company: bool) -> str:
    """A name as plain text, with the reader's word for a company account after it."""
    return _("%(name)s (company)") % {"name": name} if company and name else name


def shown_name(user: User | None) -> str:
    """The account's name as plain text, marked when company sign-in made it."""
    return marked(user.get_username(), is_company(user)) if user is not None else ""
