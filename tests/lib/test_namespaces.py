"""orbit_console.lib.namespaces: how every command resolves the namespace an administrator
types (issue 41: a name typed where an id goes was stored as the id)."""

from typing import Any

import pytest

from orbit_console.lib.namespaces import SHORT_LIST, NamespaceNotFound, Namespaces

EAST, WEST, NORTH = "e" * 32, "f" * 32, "a" * 32
KNOWN = [(EAST, "Payments"), (WEST, "Orbit demo namespace"), (NORTH, "Payments")]


def test_an_id_or_an_exact_name_names_a_namespace() -> None:
    known = Namespaces(KNOWN)
    assert known.id_of(WEST) == WEST
    assert known.id_of("Orbit demo namespace") == WEST


def test_the_deployments_name_names_it_too(settings: Any) -> None:
    settings.CONSOLE_NAMESPACE_NAMES = {WEST: "Demo"}
    known = Namespaces(KNOWN)
    assert known.id_of("Demo") == known.id_of("Orbit demo namespace") == WEST
    assert known.described(WEST) == f"'Demo' / 'Orbit demo namespace' ({WEST})"


def test_a_name_two_namespaces_share_is_refused_with_both_ids() -> None:
    with pytest.raises(
        NamespaceNotFound, match="several namespaces are named 'Payments'"
    ) as refused:
        Namespaces(KNOWN).id_of("Payments")
    assert EAST in str(refused.value) and NORTH in str(refused.value)
    assert refused.value.returncode == 1  # the command's exit status


def test_an_unknown_name_is_refused_listing_the_few_known() -> None:
    with pytest.raises(NamespaceNotFound, match="no namespace 'Payroll'") as refused:
        Namespaces(KNOWN).id_of("Payroll")
    assert f"'Orbit demo namespace' ({WEST})" in str(refused.value)


def test_case_and_spaces_count_and_the_error_points_at_the_near_miss() -> None:
    with pytest.raises(NamespaceNotFound, match="did you mean 'Orbit demo namespace'"):
        Namespaces(KNOWN).id_of(" orbit demo Namespace")
    with pytest.raises(NamespaceNotFound, match="did you mean"):
        Namespaces(KNOWN).id_of(WEST.upper())


def test_many_namespaces_are_counted_not_listed() -> None:
    many = [(f"{n:032x}", f"team {n}") for n in range(SHORT_LIST + 1)]
    with pytest.raises(NamespaceNotFound, match="console namespaces lists them") as refused:
        Namespaces(many).id_of("team x")
    assert "team 3" not in str(refused.value)
    with pytest.raises(NamespaceNotFound, match="no namespace is known"):
        Namespaces([]).id_of("team 3")
