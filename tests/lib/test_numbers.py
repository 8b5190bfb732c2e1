"""``lib/numbers.py``: a number a client sent becomes an ``int`` only once its size shows it is
within range (issue 29); the refusal says whether it is no integer or out of range."""

import signal
from collections.abc import Iterator
from decimal import Decimal

import pytest

from orbit_console.lib.numbers import NotAnInteger, OutOfRange, decimal_in, integer_in
from orbit_console.lib.strictjson import loads


@pytest.fixture(autouse=True)
def answered_at_once() -> Iterator[None]:
    """Every case here answers in microseconds, where a conversion of 1E+2000000 takes
    minutes: a generous bound turns such a regression into a failure, not a hang."""
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("a number took seconds to judge"))
    signal.alarm(10)
    yield
    signal.alarm(0)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1000", 1000),
        ("600000", 600000),
        ("6000.0", 6000),  # an integer, as JSON Schema has it
        ("6E3", 6000),
        ("6.000E+3", 6000),
        ("60000000000E-7", 6000),
        ("5" + "0" * 300_000 + "E-299997", 5000),  # 300 000 digits, a small value
    ],
)
def test_integers_in_range_are_taken(text: str, expected: int) -> None:
    assert integer_in(loads(text), 1000, 600_000) == expected


@pytest.mark.parametrize(
    "text",
    [
        "999",
        "600001",
        "-5000",
        "1E+2000000",
        "-1E+2000000",
        "1.5E+2000000",
        "9" * 4000,
        "9" * 500_000,
        "1e999999999999999999",
    ],
)
def test_integers_out_of_range_are_refused_by_their_size(text: str) -> None:
    with pytest.raises(OutOfRange):
        integer_in(loads(text), 1000, 600_000)


@pytest.mark.parametrize(
    "text",
    [
        '"5000"',
        "true",
        "false",
        "null",
        "[5000]",
        "5000.5",
        "1E-2000000",
        "0." + "0" * 500_000 + "1",
    ],
)
def test_what_is_no_integer_is_refused_as_such(text: str) -> None:
    with pytest.raises(NotAnInteger):
        integer_in(loads(text), 0, 600_000)


def test_written_as_integer_refuses_fractions_and_exponents_RT2() -> None:
    assert integer_in(loads("60000"), 1, 10**10, written_as_integer=True) == 60000
    for text in ("60000.0", "6E4", "6e+4"):
        with pytest.raises(NotAnInteger):
            integer_in(loads(text), 1, 10**10, written_as_integer=True)
    # An integer too long for the parser's int (strictjson.MAX_INT_DIGITS) is still one.
    with pytest.raises(OutOfRange):
        integer_in(loads("9" * 5000), 1, 10**10, written_as_integer=True)


def test_the_bounds_are_inclusive_whatever_the_type() -> None:
    maximum = 2**64 - 1
    assert integer_in(maximum, 1, maximum) == maximum
    assert integer_in(Decimal(maximum), 1, maximum) == maximum
    with pytest.raises(OutOfRange):
        integer_in(Decimal(maximum + 1), 1, maximum)
    assert integer_in(Decimal("0E+5"), 0, 1) == 0
    assert integer_in(Decimal("-0.0"), 0, 1) == 0


@pytest.mark.parametrize(
    ("text", "expected"), [("1", 1), ("100", 100), ("007", 7), ("0" * 18 + "42", 42)]
)
def test_query_digits_in_range_are_taken(text: str, expected: int) -> None:
    assert decimal_in(text, 1, 100) == expected


@pytest.mark.parametrize(
    "text", ["0", "101", "9" * 100_000, "1" + "0" * 5000, "0" * 19 + "42", "0" * 100_000 + "1"]
)
def test_query_digits_out_of_range_are_refused(text: str) -> None:
    """Out of range by value, or by length: more than twenty characters, zeros included."""
    with pytest.raises(OutOfRange):
        decimal_in(text, 1, 100)


@pytest.mark.parametrize("text", ["", "-1", "+1", " 1", "1e2", "1.0", "\u0661", "\uff11"])
def test_query_text_that_is_not_ascii_digits_is_refused(text: str) -> None:
    with pytest.raises(NotAnInteger):
        decimal_in(text, 1, 100)
