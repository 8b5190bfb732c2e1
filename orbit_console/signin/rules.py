"""From what the identity provider says of a person to their roles and namespaces.

``OIDC_ROLE_RULES`` is an ordered JSON list of rules; the first whose claim holds its value
decides the person's roles and the namespaces they work in (docs/sign-in.md)::

    [{"value": "orbit-supervisors", "roles": ["supervisor", "operator"],
      "namespaces": ["payments"]},
     {"claim": "hd", "value": "example.com", "roles": ["auditor"], "namespaces": ["payments"]}]

A rule that names no claim reads the groups claim, ``OIDC_GROUPS_CLAIM`` (``groups`` unless set:
``roles`` for Entra ID's app roles, a namespaced claim for Auth0), filtered by
``OIDC_GROUPS_FILTER``.

A person whom no rule matches is refused: no account is made for them. Pure functions: read
by settings.py at start, so a bad rule stops the process there.
"""

import json
from dataclasses import dataclass
from typing import Any

from django.core.exceptions import ImproperlyConfigured

from orbit_console.lib.patterns import Pattern, PatternRefused, linear

ROLES = ("operator", "supervisor", "auditor")


@dataclass(frozen=True)
class Rule:
    claim: str | None  # None: the groups claim (OIDC_GROUPS_CLAIM)
    value: str
    roles: frozenset[str]
    namespaces: tuple[str, ...]  # ids or names; empty: none (against an external Orbit: moot)

    def matches(self, claims: dict[str, Any], *, groups_claim: str) -> bool:
        held = claims.get(self.claim or groups_claim)
        if isinstance(held, list):
            return self.value in [str(item) for item in held]
        if isinstance(held, bool):
            return self.value == ("true" if held else "false")
        return held is not None and str(held) == self.value


def parse_rules(text: str) -> tuple[Rule, ...]:
    """The rules of ``OIDC_ROLE_RULES``; ``ImproperlyConfigured`` when they are not rules."""
    if not text.strip():
        return ()
    try:
        raw = json.loads(text)
    except ValueError as bad:
        raise ImproperlyConfigured(f"OIDC_ROLE_RULES is not JSON: {bad}") from None
    if not isinstance(raw, list):
        raise ImproperlyConfigured("OIDC_ROLE_RULES must be a JSON list of rules")
    rules = []
    for position, item in enumerate(raw, 1):
        where = f"OIDC_ROLE_RULES rule {position}"
        if not isinstance(item, dict) or set(item) - {"claim", "value", "roles", "namespaces"}:
            raise ImproperlyConfigured(f"{where}: an object of claim, value, roles and namespaces")
        claim, value = item.get("claim"), item.get("value")
        roles, namespaces = item.get("roles"), item.get("namespaces", [])
        if (claim is not None and (not isinstance(claim, str) or not claim)) or (
            not isinstance(value, str) or not value
        ):
            raise ImproperlyConfigured(f"{where}: claim and value are strings")
        if (
            not isinstance(roles, list)
            or not roles
            or not all(isinstance(role, str) and role in ROLES for role in roles)
        ):
            raise ImproperlyConfigured(f"{where}: roles is a list of {', '.join(ROLES)}")
        if not isinstance(namespaces, list) or not all(isinstance(n, str) for n in namespaces):
            raise ImproperlyConfigured(f"{where}: namespaces is a list of ids or names")
        rules.append(Rule(claim, value, frozenset(roles), tuple(namespaces)))
    return tuple(rules)


def parse_filter(text: str) -> Pattern | None:
    """``OIDC_GROUPS_FILTER``, matched by RE2 in linear time (``lib/patterns.py``): the groups
    it is tried on are the identity provider's, as many and as long as it sends."""
    if not text:
        return None
    try:
        return linear(text)
    except PatternRefused as bad:
        raise ImproperlyConfigured(f"OIDC_GROUPS_FILTER: {bad}") from None


def groups_of(claims: dict[str, Any], *, claim: str, keep: Pattern | None) -> list[str]:
    """The person's groups in ``claim`` (a list, or one string), only those ``keep`` matches
    when set: a person in thousands of groups need not carry all of them into the session."""
    held = claims.get(claim)
    if isinstance(held, str):
        held = [held]
    if not isinstance(held, list):
        return []
    groups = [str(group) for group in held]
    return [group for group in groups if keep is None or keep.search(group)]


def first_match(
    rules: tuple[Rule, ...], claims: dict[str, Any], *, groups_claim: str = "groups"
) -> Rule | None:
    for rule in rules:
        if rule.matches(claims, groups_claim=groups_claim):
            return rule
    return None


def admitting_rule(claims: dict[str, Any]) -> Rule | None:
    """The rule of ``OIDC_ROLE_RULES`` that admits the person the provider describes with
    ``claims`` (the ID token's with userinfo's over them), if any. Their groups, in
    ``OIDC_GROUPS_CLAIM``, are kept filtered in ``claims`` (what a held sign-in shows)."""
    from django.conf import settings

    claim = settings.OIDC_GROUPS_CLAIM
    claims[claim] = groups_of(claims, claim=claim, keep=settings.OIDC_GROUPS_FILTER)
    return first_match(settings.OIDC_ROLE_RULES, claims, groups_claim=claim)
