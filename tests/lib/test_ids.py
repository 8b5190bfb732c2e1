"""orbit_console.lib.ids: the shape of ids (C5) and their order (docs/performance.md, growth)."""

import time

import pytest

from orbit_console.lib.ids import is_id, new_id, new_request_id


def test_new_ids_have_the_shape_of_ids_C5() -> None:
    ids = [new_id() for _ in range(1000)]
    assert all(is_id(value) for value in ids)
    assert len(set(ids)) == len(ids)


def test_new_ids_begin_with_the_time_in_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    value = new_id()
    after = time.time_ns() // 1_000_000
    assert before <= int(value[:12], 16) <= after


def test_ids_made_later_sort_later() -> None:
    first = new_id()
    time.sleep(0.002)
    second = new_id()
    assert first < second


def test_the_rest_of_an_id_is_random() -> None:
    tails = {new_id()[12:] for _ in range(1000)}
    assert len(tails) == 1000


def test_request_ids_are_wholly_random() -> None:
    values = [new_request_id() for _ in range(200)]
    assert all(is_id(value) for value in values)
    assert len({value[:12] for value in values}) == len(values)


@pytest.mark.parametrize(
    "value",
    ["", "0" * 31, "0" * 33, "A" * 32, "g" * 32, " " + "0" * 31, 12, None, b"0" * 32],
)
def test_is_id_refuses_anything_else_C5(value: object) -> None:
    assert not is_id(value)
