"""RFC 3339 times as the recovery API takes and gives them (RT3).

Input: exactly ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z`` — UTC with ``Z``, at most six fraction
digits, year 2000-9998. ``datetime.fromisoformat`` accepts far more (spaces, offsets, week
dates), so the shape is checked first.

Output: UTC with ``Z`` and the fraction without trailing zeros, as Go's RFC3339Nano prints it.
"""

import re
from datetime import UTC, datetime

_SHAPE = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})T([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,6}))?Z"
)

MIN_YEAR = 2000
MAX_YEAR = 9998


class TimeFormatError(ValueError):
    pass


def parse_utc(value: str) -> datetime:
    match = _SHAPE.fullmatch(value)
    if match is None:
        raise TimeFormatError(
            "must be an RFC 3339 time in UTC such as 2026-09-17T00:00:00Z "
            "(Z only, at most 6 fraction digits)"
        )
    year, month, day, hour, minute, second, fraction = match.groups()
    if not MIN_YEAR <= int(year) <= MAX_YEAR:
        raise TimeFormatError(f"year must be between {MIN_YEAR} and {MAX_YEAR}")
    try:
        return datetime(
            int(year),
            int(month),
            int(day),
            int(hour),
            int(minute),
            int(second),
            int((fraction or "0").ljust(6, "0")),
            tzinfo=UTC,
        )
    except ValueError as exc:
        raise TimeFormatError(f"is not a valid date and time: {exc}") from None


def format_utc(value: datetime) -> str:
    value = value.astimezone(UTC)
    text = value.strftime("%Y-%m-%dT%H:%M:%S")
    if value.microsecond:
        text += "." + f"{value.microsecond:06d}".rstrip("0")
    return text + "Z"
