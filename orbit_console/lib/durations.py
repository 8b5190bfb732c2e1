"""Durations typed on the command line: ``30m``, ``4h``, ``2d``, or parts of them in that order
(``1d12h``, ``1h30m``), parsed strictly.

Whole minutes, hours and days only (``m``, ``h``, ``d``; ASCII digits, no sign, no space, no
fraction, no unit twice or out of order), at least a minute and at most a year: an objective
of seconds is a typo, one past a year means nothing anyone waits for. Anything else is an
error that says what is taken, so that a command changes nothing on a text it misread.
"""

import re
from datetime import timedelta

UNITS = {"d": 86_400, "h": 3_600, "m": 60}
SHORTEST = timedelta(minutes=1)
LONGEST = timedelta(days=365)
# At most one part per unit, days before hours before minutes; a part is at most 6 digits
# (the longest allowed duration is 525 600 minutes), so no text makes a huge number.
_DURATION = re.compile(r"(?:([0-9]{1,6})d)?(?:([0-9]{1,6})h)?(?:([0-9]{1,6})m)?", re.ASCII)


class DurationError(ValueError):
    """A text that is no duration this module takes; the message says why."""


def parse_duration(text: str) -> timedelta:
    """The duration ``text`` says: ``4h``, ``30m``, ``2d``, ``1d12h``..."""
    match = _DURATION.fullmatch(text)
    if not text or match is None:
        raise DurationError(
            f"{text!r} is not a duration: write a whole number of minutes, hours or days, "
            "e.g. 30m, 4h, 2d or 1h30m"
        )
    seconds = sum(
        int(part) * unit for part, unit in zip(match.groups(), UNITS.values(), strict=True) if part
    )
    duration = timedelta(seconds=seconds)
    if duration < SHORTEST:
        raise DurationError(f"{text!r} is shorter than a minute: a duration is at least 1m")
    if duration > LONGEST:
        raise DurationError(f"{text!r} is longer than a year: a duration is at most 365d")
    return duration


def format_duration(duration: timedelta) -> str:
    """A duration as ``parse_duration`` reads it back: ``4h``, ``1d12h``, ``1h30m`` (whole
    minutes; a duration under a minute is ``0m``)."""
    rest = max(int(duration.total_seconds()) // 60 * 60, 0)
    parts = []
    for unit, length in UNITS.items():
        count, rest = divmod(rest, length)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0m"
