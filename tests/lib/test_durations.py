"""Durations typed on the command line (``lib/durations.py``, issue 43's objectives): the units
taken, and every other text refused with a reason — garbage, zero, negative, fractions, spaces,
other digits, huge numbers."""

from datetime import timedelta

import pytest

from orbit_console.lib.durations import DurationError, format_duration, parse_duration


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("30m", timedelta(minutes=30)),
        ("4h", timedelta(hours=4)),
        ("2d", timedelta(days=2)),
        ("1h30m", timedelta(minutes=90)),
        ("1d12h", timedelta(hours=36)),
        ("1d2h3m", timedelta(days=1, hours=2, minutes=3)),
        ("90m", timedelta(minutes=90)),
        ("04h", timedelta(hours=4)),
        ("1m", timedelta(minutes=1)),
        ("365d", timedelta(days=365)),
        ("8760h", timedelta(days=365)),
    ],
)
def test_a_duration_is_read_in_minutes_hours_and_days(text: str, expected: timedelta) -> None:
    assert parse_duration(text) == expected


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", "is not a duration"),
        ("4", "is not a duration"),
        ("h", "is not a duration"),
        ("4 h", "is not a duration"),
        (" 4h", "is not a duration"),
        ("4h\n", "is not a duration"),
        ("4H", "is not a duration"),
        ("4hours", "is not a duration"),
        ("1.5h", "is not a duration"),
        ("-4h", "is not a duration"),
        ("+4h", "is not a duration"),
        ("4s", "is not a duration"),
        ("4w", "is not a duration"),
        ("30m4h", "is not a duration"),  # out of order
        ("4h4h", "is not a duration"),  # a unit twice
        ("\u0664h", "is not a duration"),  # Arabic-Indic digit four
        ("\uff14h", "is not a duration"),  # fullwidth four
        ("9" * 40 + "d", "is not a duration"),  # no huge number is ever made
        ("0m", "shorter than a minute"),
        ("0d0h0m", "shorter than a minute"),
        ("366d", "longer than a year"),
        ("999999d", "longer than a year"),
        ("364d24h1m", "longer than a year"),
    ],
)
def test_anything_else_is_refused_with_a_reason(text: str, said: str) -> None:
    with pytest.raises(DurationError, match=said):
        parse_duration(text)


@pytest.mark.parametrize("text", ["30m", "4h", "2d", "1h30m", "1d12h", "1d2h3m"])
def test_a_duration_is_written_back_as_it_is_read(text: str) -> None:
    assert format_duration(parse_duration(text)) == text


def test_writing_keeps_whole_minutes() -> None:
    assert format_duration(timedelta(minutes=90, seconds=59)) == "1h30m"
    assert format_duration(timedelta(seconds=20)) == "0m"
