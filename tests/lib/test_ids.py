"""orbit_console.lib.ids: the shape of ids (C5), the hour they begin with (docs/performance.md,
the cost of growth), and what the console shows of them (their first eight characters)."""

import time

import pytest

from orbit_console.lib.ids import hour_prefix, is_id, new_id, new_request_id


def test_new_ids_have_the_shape_of_ids_C5() -> None:
    ids = [new_id() for _ in range(1000)]
    assert all(is_id(value) for value in ids)
    assert len(set(ids)) == len(ids)


def test_new_ids_begin_with_the_hour_they_were_made_in() -> None:
    before = hour_prefix(time.time())
    value = new_id()
    after = hour_prefix(time.time())
    assert value[:2] in {before, after}


@pytest.mark.parametrize(
    ("seconds", "prefix"),
    [
        (0, "00"),
        (3599, "00"),
        (3600, "01"),
        (255 * 3600, "ff"),
        (256 * 3600, "00"),
        (1_764_684_000, "ce"),
    ],
)
def test_the_hour_cycles_through_256_prefixes(seconds: int, prefix: str) -> None:
    assert hour_prefix(seconds) == prefix


def test_ids_made_in_one_hour_differ_in_their_first_eight_characters() -> None:
    """What the console shows of an id (its start) tells the ids of one busy hour apart."""
    shown = {new_id()[:8] for _ in range(2000)}
    assert len(shown) >= 1995  # 24 random bits each: a clash or two in 2 000 is possible


def test_request_ids_are_wholly_random() -> None:
    values = [new_request_id() for _ in range(200)]
    assert all(is_id(value) for value in values)
    assert len({value[:8] for value in values}) == len(values)


@pytest.mark.parametrize(
    "value",
    ["", "0" * 31, "0" * 33, "A" * 32, "g" * 32, " " + "0" * 31, 12, None, b"0" * 32],
)
def test_is_id_refuses_anything_else_C5(value: object) -> None:
    assert not is_id(value)
