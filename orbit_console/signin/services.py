"""Writes of company sign-in: provisioning a person and keeping their roles and credentials in
step with their groups (docs/sign-in.md)."""

import logging
from typing import Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from orbit_console.lib.namespaces import NamespaceAmbiguous, NamespaceNotFound
from orbit_console.people.accounts import account_company, accounts_link
from orbit_console.people.credentials import credential_drop, mint_embedded, person_roles_set
from orbit_console.people.models import Account, OrbitCredential
from orbit_console.people.namespaces import known_namespaces
from orbit_console.people.person import role_permissions
from orbit_console.signin.models import HeldSignin, OidcIdentity
from orbit_console.signin.placement import (
    claim_text,
    email_verified,
    name_of_its_own,
    place,
    wanted_name,
)
from orbit_console.signin.rules import Rule

log = logging.getLogger(__name__)


def _namespace_ids(named: tuple[str, ...]) -> list[str]:
    """The embedded ledger's namespaces a rule names, each by its id or its exact name, by the
    one rule every command uses (``lib/namespaces.py``). A name that no namespace has is
    skipped (a rule may be written before its namespace exists; ``manage.py signin check``
    says so); a name that several share raises: which one was meant is
    the administrator's to say, never a silent pick (``NamespaceAmbiguous``)."""
    known = known_namespaces()
    found: list[str] = []
    for name in named:
        try:
            found.append(known.id_of(name))
        except NamespaceAmbiguous:
            raise
        except NamespaceNotFound:
            log.warning("OIDC_ROLE_RULES names the namespace %r, which does not exist", name[:60])
    return list(dict.fromkeys(found))


@transaction.atomic
def oidc_person_sync(*, issuer: str, claims: dict[str, Any], rule: Rule) -> User | HeldSignin:
    """The person the provider ``issuer`` knows by ``claims["sub"]``, with exactly the roles of
    ``rule``; on the embedded API, with a credential in each of its namespaces for those roles
    (minted again when the roles changed) and none in any other.

    At their first sign-in their account is made — a company account with a name of its own,
    linked to the person whose verified e-mail address it carries — unless what the provider
    says matches an account here less surely: then nothing is made, and the sign-in is held
    for an administrator (``HeldSignin``, returned; signin/placement.py)."""
    subject = str(claims["sub"])
    identity = (
        OidcIdentity.objects.select_for_update()
        .select_related("user")
        .filter(issuer=issuer, subject=subject)
        .first()
    )
    if identity is None:
        placement = place(claims)
        if placement.held_by:
            return _hold(issuer=issuer, claims=claims, matches=placement.held_by)
        identity = _company_account(issuer=issuer, claims=claims)
        if placement.link_to is not None:
            accounts_link(user=identity.user, other=placement.link_to, how=Account.EMAIL, by=issuer)
    user = identity.user
    email = claims.get("email")
    if isinstance(email, str) and email != user.email and len(email) <= 254:
        user.email = email
        user.save(update_fields=["email"])
    identity.signed_in_at = timezone.now()
    identity.save(update_fields=["signed_in_at"])
    person_roles_set(user=user, roles=rule.roles)
    if settings.ORBIT_API_EMBEDDED:
        _credentials_sync(
            user=user, roles=rule.roles, namespace_ids=_namespace_ids(rule.namespaces)
        )
    return user


def _company_account(*, issuer: str, claims: dict[str, Any]) -> OidcIdentity:
    """A company account for ``claims``' person: a name of its own, no usable password."""
    email = claim_text(claims, "email")
    user = User.objects.create_user(
        name_of_its_own(wanted_name(claims)), email=email if len(email) <= 254 else ""
    )
    user.set_unusable_password()
    user.save()
    account_company(user=user)
    return OidcIdentity.objects.create(user=user, issuer=issuer, subject=str(claims["sub"]))


def _hold(*, issuer: str, claims: dict[str, Any], matches: tuple[User, ...]) -> HeldSignin:
    now = timezone.now()
    said = {
        "name": wanted_name(claims),
        "email": claim_text(claims, "email")[:254],
        "email_verified": email_verified(claims),
        "seen_at": now,
    }
    held, _created = HeldSignin.objects.update_or_create(
        issuer=issuer,
        subject=str(claims["sub"]),
        defaults=said,
        create_defaults={**said, "created_at": now},
    )
    held.matches.set(matches)
    return held


class HoldRefused(Exception):
    """The held sign-in cannot be decided as asked; the message says why."""


@transaction.atomic
def held_signin_decide(*, held_id: str, same_as: User | None, by: str) -> User:
    """An administrator decides a held sign-in: the company account is made now (a name of its
    own, no role until the person signs in and their groups give one), linked to ``same_as``'s
    person when it is theirs, a person of its own when ``same_as`` is ``None``."""
    held = HeldSignin.objects.select_for_update().filter(id=held_id).first()
    if held is None:
        raise HoldRefused(f"no held company sign-in {held_id[:40]!r}")
    claims = {"sub": held.subject, "preferred_username": held.name, "email": held.email}
    identity = _company_account(issuer=held.issuer, claims=claims)
    if same_as is not None:
        accounts_link(user=identity.user, other=same_as, how=Account.ADMINISTRATOR, by=by)
    held.delete()
    return identity.user


def _credentials_sync(*, user: User, roles: frozenset[str], namespace_ids: list[str]) -> None:
    wanted = role_permissions(roles)
    held = {c.namespace_id: c for c in OrbitCredential.objects.filter(user=user)}
    for namespace_id in held:
        if namespace_id not in namespace_ids:
            credential_drop(user=user, namespace_id=namespace_id)
    for namespace_id in namespace_ids:
        current = held.get(namespace_id)
        if current is None or frozenset(current.permissions.split()) != wanted:
            mint_embedded(user=user, roles=roles, namespace_id=namespace_id)


@transaction.atomic
def oidc_person_revoke(*, issuer: str, subject: str) -> User | None:
    """The provider no longer admits the person ``subject`` (no rule matches their groups):
    their roles and credentials go (revoked in the embedded ledger). The account stays, for
    the audit's names; it can do nothing."""
    identity = (
        OidcIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
    )
    if identity is None:
        return None
    person_roles_set(user=identity.user, roles=frozenset())
    for namespace_id in OrbitCredential.objects.filter(user=identity.user).values_list(
        "namespace_id", flat=True
    ):
        credential_drop(user=identity.user, namespace_id=namespace_id)
    return identity.user
