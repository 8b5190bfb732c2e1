"""orbit_console.lib.rfc3339: the times the recovery API takes and gives (RT3)."""

from datetime import UTC, datetime, timedelta, timezone

import pytest

from orbit_console.lib.rfc3339 import TimeFormatError, format_utc, parse_utc


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-09-17T00:00:00Z", datetime(2026, 9, 17, tzinfo=UTC)),
        ("2026-09-17T12:34:56Z", datetime(2026, 9, 17, 12, 34, 56, tzinfo=UTC)),
        ("2026-09-17T12:34:56.1Z", datetime(2026, 9, 17, 12, 34, 56, 100_000, tzinfo=UTC)),
        ("2026-09-17T12:34:56.12Z", datetime(2026, 9, 17, 12, 34, 56, 120_000, tzinfo=UTC)),
        ("2026-09-17T12:34:56.123Z", datetime(2026, 9, 17, 12, 34, 56, 123_000, tzinfo=UTC)),
        ("2026-09-17T12:34:56.1234Z", datetime(2026, 9, 17, 12, 34, 56, 123_400, tzinfo=UTC)),
        ("2026-09-17T12:34:56.12345Z", datetime(2026, 9, 17, 12, 34, 56, 123_450, tzinfo=UTC)),
        ("2026-09-17T12:34:56.123456Z", datetime(2026, 9, 17, 12, 34, 56, 123_456, tzinfo=UTC)),
        ("2026-09-17T12:34:56.000001Z", datetime(2026, 9, 17, 12, 34, 56, 1, tzinfo=UTC)),
        ("2026-09-17T12:34:56.000000Z", datetime(2026, 9, 17, 12, 34, 56, tzinfo=UTC)),
        ("2026-09-17T12:34:56.0Z", datetime(2026, 9, 17, 12, 34, 56, tzinfo=UTC)),
        ("2026-12-31T23:59:59.999999Z", datetime(2026, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)),
        ("2028-02-29T00:00:00Z", datetime(2028, 2, 29, tzinfo=UTC)),
        ("2000-01-01T00:00:00Z", datetime(2000, 1, 1, tzinfo=UTC)),
        ("9998-12-31T23:59:59.999999Z", datetime(9998, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC)),
    ],
)
def test_parse_utc_accepts_z_with_up_to_six_fraction_digits_RT3(
    text: str, expected: datetime
) -> None:
    parsed = parse_utc(text)
    assert parsed == expected
    assert parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize(
    "text",
    [
        "2026-09-17T00:00:00+00:00",  # an offset, even a zero one
        "2026-09-17T00:00:00-00:00",
        "2026-09-17T08:00:00+08:00",
        "2026-09-17T00:00:00+0000",
        "2026-09-17T00:00:00",  # no zone at all
        "2026-09-17T00:00:00.123",
        "2026-09-17T00:00:00z",  # lowercase z
        "2026-09-17t00:00:00Z",  # lowercase t
        "2026-09-17 00:00:00Z",  # a space instead of T
        "2026-09-17_00:00:00Z",
        "2026-09-17T00:00:00.1234567Z",  # seven fraction digits
        "2026-09-17T00:00:00.123456789Z",
        "2026-09-17T00:00:00.Z",  # a dot without digits
        "2026-09-17T00:00:00,5Z",  # a comma as decimal sign
        "2026-09-17T00:00Z",  # no seconds
        "2026-09-17T00Z",
        "2026-09-17Z",
        "2026-09-17",
        "2026-09-17T0:00:00Z",
        "2026-9-17T00:00:00Z",
        "26-09-17T00:00:00Z",
        "+2026-09-17T00:00:00Z",
        "20260917T000000Z",  # basic format
        "2026-W38-4T00:00:00Z",  # week date
        "2026-260T00:00:00Z",  # ordinal date
        " 2026-09-17T00:00:00Z",
        "2026-09-17T00:00:00Z ",
        "2026-09-17T00:00:00Z\n",
        "2026-09-17T00:00:00 Z",
        "2026-09-17T00:00:00ZZ",
        "",
        "Z",
        "now",
    ],
)
def test_parse_utc_rejects_other_shapes_RT3(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_utc(text)


@pytest.mark.parametrize(
    "text",
    [
        "1999-12-31T23:59:59.999999Z",
        "9999-01-01T00:00:00Z",
        "0000-01-01T00:00:00Z",
        "1970-01-01T00:00:00Z",
    ],
)
def test_parse_utc_rejects_years_outside_2000_to_9998_RT3(text: str) -> None:
    with pytest.raises(TimeFormatError, match="year"):
        parse_utc(text)


@pytest.mark.parametrize(
    "text",
    [
        "2026-02-30T00:00:00Z",
        "2026-02-29T00:00:00Z",  # 2026 is not a leap year
        "2100-02-29T00:00:00Z",  # nor is 2100
        "2026-04-31T00:00:00Z",
        "2026-00-10T00:00:00Z",
        "2026-13-01T00:00:00Z",
        "2026-01-00T00:00:00Z",
        "2026-01-32T00:00:00Z",
        "2026-01-01T24:00:00Z",
        "2026-01-01T23:60:00Z",
        "2026-12-31T23:59:60Z",  # leap seconds are not representable
    ],
)
def test_parse_utc_rejects_invalid_dates_and_times_RT3(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_utc(text)


@pytest.mark.parametrize(
    "text",
    [
        "\uff12\uff10\uff12\uff16-09-17T00:00:00Z",  # fullwidth digits
        "2026-\u0660\u0669-17T00:00:00Z",  # Arabic-Indic digits
        "2026-09-17T00:00:00.\u0967Z",  # a Devanagari digit in the fraction
        "2026-09-17T00:00:0\U0001d7d8Z",  # a mathematical digit
        "2026-09-17T00:00:00\uff3a",  # a fullwidth Z
        "2026-09-17\uff3400:00:00Z",
    ],
)
def test_parse_utc_rejects_non_ascii_digits_and_letters_RT3(text: str) -> None:
    with pytest.raises(TimeFormatError):
        parse_utc(text)


def test_time_format_error_is_a_value_error_with_a_helpful_message() -> None:
    with pytest.raises(ValueError, match="UTC") as raised:
        parse_utc("2026-09-17T00:00:00+01:00")
    assert isinstance(raised.value, TimeFormatError)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (datetime(2026, 9, 17, tzinfo=UTC), "2026-09-17T00:00:00Z"),
        (datetime(2026, 9, 17, 1, 2, 3, 500_000, tzinfo=UTC), "2026-09-17T01:02:03.5Z"),
        (datetime(2026, 9, 17, 1, 2, 3, 120_000, tzinfo=UTC), "2026-09-17T01:02:03.12Z"),
        (datetime(2026, 9, 17, 1, 2, 3, 100_100, tzinfo=UTC), "2026-09-17T01:02:03.1001Z"),
        (datetime(2026, 9, 17, 1, 2, 3, 123_456, tzinfo=UTC), "2026-09-17T01:02:03.123456Z"),
        (datetime(2026, 9, 17, 1, 2, 3, 1, tzinfo=UTC), "2026-09-17T01:02:03.000001Z"),
        (datetime(2026, 9, 17, 1, 2, 3, 10, tzinfo=UTC), "2026-09-17T01:02:03.00001Z"),
        (datetime(2000, 1, 1, tzinfo=UTC), "2000-01-01T00:00:00Z"),
        (datetime(9998, 12, 31, 23, 59, 59, 999_999, tzinfo=UTC), "9998-12-31T23:59:59.999999Z"),
    ],
)
def test_format_utc_prints_z_and_trims_fraction_zeros_like_rfc3339nano(
    value: datetime, expected: str
) -> None:
    assert format_utc(value) == expected


def test_format_utc_converts_other_offsets_to_utc() -> None:
    value = datetime(2026, 9, 17, 8, 30, 0, 250_000, tzinfo=timezone(timedelta(hours=8)))
    assert format_utc(value) == "2026-09-17T00:30:00.25Z"
    west = datetime(2026, 12, 31, 23, 0, tzinfo=timezone(timedelta(hours=-5)))
    assert format_utc(west) == "2027-01-01T04:00:00Z"


@pytest.mark.parametrize(
    "text",
    [
        "2026-09-17T00:00:00Z",
        "2026-09-17T23:59:59.5Z",
        "2026-09-17T23:59:59.05Z",
        "2026-09-17T23:59:59.123456Z",
        "2026-09-17T23:59:59.000001Z",
        "2000-01-01T00:00:00Z",
        "9998-12-31T23:59:59.999999Z",
    ],
)
def test_format_of_parse_gives_back_the_canonical_text_RT3(text: str) -> None:
    assert format_utc(parse_utc(text)) == text


@pytest.mark.parametrize(
    ("text", "canonical"),
    [
        ("2026-09-17T00:00:00.000000Z", "2026-09-17T00:00:00Z"),
        ("2026-09-17T00:00:00.0Z", "2026-09-17T00:00:00Z"),
        ("2026-09-17T00:00:00.100Z", "2026-09-17T00:00:00.1Z"),
        ("2026-09-17T00:00:00.123400Z", "2026-09-17T00:00:00.1234Z"),
    ],
)
def test_format_utc_trims_what_parse_utc_accepts_with_trailing_zeros(
    text: str, canonical: str
) -> None:
    assert format_utc(parse_utc(text)) == canonical
    assert parse_utc(canonical) == parse_utc(text)


@pytest.mark.parametrize("micro", [0, 1, 9, 10, 99_999, 100_000, 500_000, 999_999])
def test_parse_of_format_gives_back_the_same_instant(micro: int) -> None:
    value = datetime(2031, 7, 4, 5, 6, 7, micro, tzinfo=UTC)
    assert parse_utc(format_utc(value)) == value
