"""``OIDC_GROUPS_FILTER`` is an administrator's pattern tried on every group the identity
provider sends at each sign-in: it is matched by RE2, in time linear in each group's name, and
what RE2 cannot express stops the process at start, named (issue 41, as evidence patterns)."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from orbit_console.signin.rules import groups_of, parse_filter


def test_a_catastrophic_filter_finishes_on_a_hostile_group() -> None:
    keep = parse_filter("^(a+)+$")
    hostile = "a" * 50_000 + "!"
    claims = {"groups": [hostile, "aaa", "orbit-ops"]}
    assert groups_of(claims, claim="groups", keep=keep) == ["aaa"]


def test_a_filter_re2_cannot_express_stops_the_start_naming_it() -> None:
    with pytest.raises(
        ImproperlyConfigured, match=r"OIDC_GROUPS_FILTER: RE2 cannot express a lookahead"
    ):
        parse_filter("^(?=orbit-)")
    with pytest.raises(ImproperlyConfigured, match="OIDC_GROUPS_FILTER: not a regular expression"):
        parse_filter("^orbit-(")
