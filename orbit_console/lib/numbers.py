"""Bounded integers: the one place where a number a client sent becomes a Python ``int``.

A client can send any number: JSON allows ``1E+2000000`` and a 400 000-digit integer, a query
string any run of digits. Turning such a number into an ``int`` costs time quadratic in its
size — ``int(Decimal("1E+2000000"))`` held a server worker for minutes (issue 29) — and
Python refuses ``int()`` of strings over 4 300 digits. So a number is judged on its size first,
from its text or its exponent (``Decimal.adjusted()``, the position of its leading digit: no
arithmetic), and converted only once it is known to lie within the range asked for, where the
conversion costs nothing. The refusal says which rule was broken; each caller words it.
"""

from decimal import Decimal
from typing import Any

from orbit_console.lib.strictjson import Number


class NotAnInteger(ValueError):
    """The value is not an integer (not a number, a boolean, or a number with a fraction)."""


class OutOfRange(ValueError):
    """The value is an integer outside the range asked for."""


def _digits_of(minimum: int, maximum: int) -> int:
    """How many digits an integer within ``[minimum, maximum]`` can have."""
    return max(len(str(abs(minimum))), len(str(abs(maximum))))


def integer_in(value: Any, minimum: int, maximum: int, *, written_as_integer: bool = False) -> int:
    """A parsed JSON number (``lib/strictjson.py``: ``int``, or ``Decimal``/``Number``) as an
    ``int`` within ``[minimum, maximum]``.

    An integer in JSON Schema's sense by default: ``5000.0`` and ``5E3`` are 5000. With
    ``written_as_integer``, only a number written without fraction or exponent is one (a
    ``Number`` is what the parser makes of the others)."""
    if isinstance(value, bool) or not isinstance(value, int | Decimal):
        raise NotAnInteger
    if isinstance(value, int):
        # The parser makes ints of short digit strings only (strictjson.MAX_INT_DIGITS).
        if not minimum <= value <= maximum:
            raise OutOfRange
        return value
    if not value.is_finite() or (written_as_integer and isinstance(value, Number)):
        raise NotAnInteger
    # Cheap whatever the exponent: an integral value (1E+2000000) is its own integral value,
    # and a tiny one (1E-2000000) rounds to zero.
    if value != value.to_integral_value():
        raise NotAnInteger
    if not value.is_zero() and value.adjusted() >= _digits_of(minimum, maximum):
        raise OutOfRange  # more digits before the point than any integer in range has
    number = int(value)  # a few digits now
    if not minimum <= number <= maximum:
        raise OutOfRange
    return number


# No integer a query takes needs more characters (2^64 has twenty digits): a longer text is
# refused on its length, leading zeros included.
MAX_DECIMAL_CHARS = 20


def decimal_in(text: str, minimum: int, maximum: int) -> int:
    """A query-string value of ASCII digits only (no sign, no spaces; a few leading zeros
    allowed: ``005``) as an ``int`` within ``[minimum, maximum]``."""
    if not (text.isascii() and text.isdigit()):
        raise NotAnInteger
    significant = text.lstrip("0") or "0"
    if len(text) > MAX_DECIMAL_CHARS or len(significant) > _digits_of(minimum, maximum):
        raise OutOfRange
    number = int(significant)
    if not minimum <= number <= maximum:
        raise OutOfRange
    return number
