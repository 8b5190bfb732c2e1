"""How alike two account names look (people/names.py): UTS #39's confusables skeleton after
case folding, from Unicode's data as confusable-homoglyphs ships it (issue 39, item 4)."""

import time

import pytest

from orbit_console.people.names import collides, skeleton


@pytest.mark.parametrize(
    ("one", "other"),
    [
        ("\u0455upervisor", "supervisor"),  # Cyrillic dze
        ("Supervisor", "supervisor"),
        ("SUPERVISOR", "supervisor"),
        (
            "\uff53\uff55\uff50\uff45\uff52\uff56\uff49\uff53\uff4f\uff52",
            "supervisor",
        ),  # full-width
        ("\u0440\u0430\u0443\u0440\u0430l", "paypal"),  # Cyrillic r, a, u
        ("rn", "m"),  # a sequence prototype
        ("0perator", "operator"),  # a capital prototype, folded again
        ("\U0001d428\U0001d429", "op"),  # mathematical bold
        ("\u0430d\u0430", "ada"),  # a whole-script (Cyrillic a) lookalike
    ],
)
def test_names_a_reader_cannot_tell_apart_have_one_skeleton(one: str, other: str) -> None:
    assert one != other
    assert skeleton(one) == skeleton(other)
    assert collides(one, ["someone", other]) == [other]


@pytest.mark.parametrize(
    ("one", "other"),
    [("operator", "operator-2"), ("ada", "aba"), ("grace", "grace2"), ("张伟", "张三")],
)
def test_different_names_stay_different(one: str, other: str) -> None:
    assert skeleton(one) != skeleton(other)
    assert collides(one, [other]) == []


def test_a_huge_name_costs_nothing_and_a_name_never_collides_with_itself() -> None:
    started = time.perf_counter()
    skeleton("\u0455" * 1_000_000)
    assert time.perf_counter() - started < 1  # only the first characters are compared
    assert collides("ada", ["ada"]) == []
