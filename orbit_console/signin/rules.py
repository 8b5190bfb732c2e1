"""From what the identity provider says of a person to their roles and namespaces.

``OIDC_ROLE_RULES`` is an ordered JSON list of rules; the first whose claim holds its value
decides the person's roles and the namespaces they work in (docs/sign-in.md)::

    [{"claim": "groups", "value": "orbit-supervisors",
      "roles": ["supervisor", "operator"], "namespaces": ["payments"]},
     {"claim": "groups", "value": "orbit-operators", "roles": ["operator"],
      "namespaces": ["payments"]}]

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
    claim: str
    value: str
    roles: frozenset[str]
    namespaces: tuple[str, ...]  # ids or names; empty: none (against an external Orbit: moot)

    def matches(self, claims: dict[str, Any]) -> bool:
        held = claims.get(self.claim)
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
        claim, value = item.get("claim", "groups"), item.get("value")
        roles, namespaces = item.get("roles"), item.get("namespaces", [])
        if not isinstance(claim, str) or not isinstance(value, str) or not value:
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


def first_match(rules: tuple[Rule, ...], claims: dict[str, Any]) -> Rule | None:
    for rule in rules:
        if rule.matches(claims):
            return rule
    return None
