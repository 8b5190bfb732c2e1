"""Strict, exact JSON: the one place that turns bytes into values and values into bytes.

Reading (C6, RV3, I8):
- UTF-8 only, no byte-order mark, no lone surrogates (they cannot be stored or re-encoded);
- duplicate member names are refused at every depth;
- ``NaN``/``Infinity`` and other non-JSON constants are refused;
- numbers never pass through a float: short integers are ``int``, longer ones ``Decimal``,
  numbers with a fraction or an exponent become ``Number``, a ``Decimal`` that also keeps its
  text as written; none is converted at a cost beyond its length (``MAX_INT_DIGITS``);
- for the top-level object, each member's raw text is kept as received, so that a ``result``
  can be stored and answered byte for byte.

Writing: ``dumps`` renders dicts, lists, strings, numbers, booleans, ``None`` and ``RawJSON``
(text that is already JSON, inserted verbatim), so that stored payloads and results travel back
without being re-parsed. A ``Number`` is written as it was read ("1e2" stays "1e2", where
``str(Decimal("1e2"))`` is "1E+2").

``canonical`` gives a text that is equal for two values exactly when they are the same JSON
value (member order, whitespace and number spelling ignored; numbers compared by exact value),
which is how idempotent replays are recognised (O4).
"""

import json
import json.decoder
import json.encoder
import json.scanner
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from django.utils.translation import gettext_noop as _

from orbit_console.lib.explained import Explained, decoder_words


class JSONError(Explained):
    """The text is not acceptable JSON; the message says why in words a caller can act on
    (``str()`` in English, ``translated()`` in the reader's language: lib/explained.py)."""


@dataclass(frozen=True, slots=True)
class RawJSON:
    """JSON text that is written out verbatim by ``dumps``."""

    text: str


@dataclass(frozen=True, slots=True)
class Member:
    value: Any
    raw: str


_WHITESPACE = " \t\n\r"
# Arrays and objects nested deeper than this are refused: ``canonical`` and ``dumps`` recurse,
# and must stay well inside Python's recursion limit whatever the caller's stack depth.
MAX_DEPTH = 128


def _refuse_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for name, value in pairs:
        if name in result:
            raise JSONError(_("duplicate member %(name)r"), name=name)
        result[name] = value
    return result


def _refuse_constant(name: str) -> Any:
    raise JSONError(_("%(name)s is not a JSON number"), name=name)


class Number(Decimal):
    """A JSON number with a fraction or an exponent: its exact value, and its text as read."""

    __slots__ = ("text",)
    text: str

    def __new__(cls, text: str) -> "Number":
        number = super().__new__(cls, text)
        number.text = text
        return number

    def __str__(self) -> str:
        return self.text

    def __reduce__(self) -> tuple[type["Number"], tuple[str]]:
        return (Number, (self.text,))


# Longer integers are kept as ``Decimal``: ``int()`` of a digit string costs time quadratic in
# its length (a quarter of a millisecond at 4 000 digits, per number of a 512 KiB body), where
# ``Decimal()`` reads any length in linear time. Forty digits hold any integer a rule of the API
# takes (2^64 has twenty).
MAX_INT_DIGITS = 40


def _parse_int(text: str) -> int | Decimal:
    """Integers of up to ``MAX_INT_DIGITS`` characters are ``int``; longer ones are kept
    exactly as a ``Decimal`` with exponent 0, so that any JSON number is accepted and none
    costs more than its length to read (lib/numbers.py converts them, range first)."""
    return int(text) if len(text) <= MAX_INT_DIGITS else Decimal(text)


_decoder = json.JSONDecoder(
    object_pairs_hook=_refuse_duplicates,
    parse_float=Number,
    parse_int=_parse_int,
    parse_constant=_refuse_constant,
    strict=True,
)
_scan_once = json.scanner.make_scanner(_decoder)  # type: ignore[arg-type]


def _skip_ws(text: str, index: int) -> int:
    while index < len(text) and text[index] in _WHITESPACE:
        index += 1
    return index


def _scan_value(text: str, index: int) -> tuple[Any, int]:
    try:
        return _scan_once(text, index)
    except StopIteration as stop:  # the scanner says where, deep inside, a value was missing
        at = stop.value if isinstance(stop.value, int) else index
        raise JSONError(_("expected a JSON value at character %(at)s"), at=at) from None
    except json.JSONDecodeError as exc:
        raise JSONError(
            _("malformed JSON: %(why)s at character %(at)s"),
            why=decoder_words(exc.msg),
            at=exc.pos,
        ) from None
    except RecursionError:
        raise JSONError(_("JSON nested too deeply")) from None
    except InvalidOperation:  # an exponent beyond what Decimal holds: 1e99999999999999999999
        raise JSONError(_("unreadable JSON number: the exponent is too large")) from None
    except ValueError as exc:  # a number the parse hooks refuse in a way not foreseen here
        if isinstance(exc, JSONError):
            raise
        raise JSONError(_("unreadable JSON number: %(why)s"), why=str(exc)) from None


def decode_text(data: bytes) -> str:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise JSONError(_("the body is not valid UTF-8")) from None
    if text.startswith("\ufeff"):
        raise JSONError(_("the body must not start with a byte-order mark"))
    return text


def _check_scalar_strings(value: Any, depth: int = 0) -> None:
    """Refuse lone surrogates (escaped as ``\\ud800``), which are not Unicode text, and nesting
    deeper than ``MAX_DEPTH``, which ``canonical`` and ``dumps`` could not recurse through."""
    stack = [(value, depth)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, str):
            _check_text(item)
        elif isinstance(item, dict | list):
            if level >= MAX_DEPTH:
                raise JSONError(_("JSON nested deeper than %(max)s levels"), max=MAX_DEPTH)
            if isinstance(item, dict):
                stack.extend((key, level + 1) for key in item)
                stack.extend((member, level + 1) for member in item.values())
            else:
                stack.extend((element, level + 1) for element in item)


def _check_text(text: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise JSONError(
            _("a string holds a lone UTF-16 surrogate, which is not valid Unicode")
        ) from None


def loads(text: str) -> Any:
    """Parse one complete JSON document strictly."""
    index = _skip_ws(text, 0)
    value, end = _scan_value(text, index)
    if _skip_ws(text, end) != len(text):
        raise JSONError(_("unexpected data after the JSON value"))
    _check_scalar_strings(value)
    return value


def parse_object(data: bytes) -> dict[str, Member]:
    """Parse a request body that must be one JSON object; keep each member's raw text."""
    text = decode_text(data)
    index = _skip_ws(text, 0)
    if index >= len(text) or text[index] != "{":
        raise JSONError(_("the body must be a JSON object"))
    members: dict[str, Member] = {}
    index = _skip_ws(text, index + 1)
    if index < len(text) and text[index] == "}":
        index += 1
    else:
        while True:
            if index >= len(text) or text[index] != '"':
                raise JSONError(_("expected a member name at character %(at)s"), at=index)
            try:
                name, index = json.decoder.scanstring(text, index + 1, True)  # type: ignore[attr-defined]
            except json.JSONDecodeError as exc:
                raise JSONError(
                    _("malformed member name at character %(at)s"), at=exc.pos
                ) from None
            _check_text(name)
            if name in members:
                raise JSONError(_("duplicate member %(name)r"), name=name)
            index = _skip_ws(text, index)
            if index >= len(text) or text[index] != ":":
                raise JSONError(_("expected ':' after member %(name)r"), name=name)
            start = _skip_ws(text, index + 1)
            value, index = _scan_value(text, start)
            _check_scalar_strings(value, depth=1)  # inside the top-level object
            members[name] = Member(value=value, raw=text[start:index])
            index = _skip_ws(text, index)
            if index < len(text) and text[index] == ",":
                index = _skip_ws(text, index + 1)
                continue
            if index < len(text) and text[index] == "}":
                index += 1
                break
            raise JSONError(_("expected ',' or '}' at character %(at)s"), at=index)
    if _skip_ws(text, index) != len(text):
        raise JSONError(_("unexpected data after the JSON object"))
    return members


def _exact_number(value: int | Decimal) -> str:
    """The exact value of a number as sign, significant digits and exponent, without rounding.

    Read from the decimal module's scientific text (``d.dddE±x``, every digit kept), which it
    writes at C speed: a 250 000-digit number of a result takes milliseconds, where going digit
    by digit through ``as_tuple()`` took a quarter of a second."""
    number = Decimal(value)
    if not number.is_finite():  # NaN and infinities never get past the parser
        raise TypeError("not a finite number")
    if number.is_zero():
        return "0"
    mantissa, _, exponent = format(number, "E").partition("E")
    negative = mantissa.startswith("-")
    digits = mantissa.lstrip("-").replace(".", "")
    stripped = digits.rstrip("0")
    # ``x`` is the exponent of the first digit; the last significant one's is lower.
    last = int(exponent) - (len(stripped) - 1)
    return f"{'-' if negative else ''}{stripped}e{last}"


def canonical(value: Any) -> str:
    """A text equal for two parsed values exactly when they are the same JSON value."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | Decimal):
        return _exact_number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=True)
    if isinstance(value, list):
        return "[" + ",".join(canonical(item) for item in value) + "]"
    if isinstance(value, dict):
        items = sorted(value.items())
        return "{" + ",".join(f"{canonical(k)}:{canonical(v)}" for k, v in items) + "}"
    raise TypeError(f"not a parsed JSON value: {type(value).__name__}")


def dumps(value: Any, *, indent: int | None = None) -> str:
    """Render JSON; ``RawJSON`` is inserted verbatim and nothing goes through a float.

    With ``indent``, the text is pretty-printed for people (``RawJSON`` is then re-parsed and
    indented too, still exactly).
    """
    if indent is None:
        return _compact(value)
    return _pretty(value, indent, 0)


def _compact(value: Any) -> str:
    if isinstance(value, RawJSON):
        return value.text
    if isinstance(value, list | tuple):
        return "[" + ",".join(_compact(item) for item in value) + "]"
    if isinstance(value, dict):
        members = (f"{_string(str(k))}:{_compact(v)}" for k, v in value.items())
        return "{" + ",".join(members) + "}"
    return _scalar(value)


def _pretty(value: Any, indent: int, depth: int) -> str:
    if isinstance(value, RawJSON):
        value = loads(value.text)
    pad = " " * (indent * (depth + 1))
    end = " " * (indent * depth)
    if isinstance(value, list | tuple):
        if not value:
            return "[]"
        items = ",\n".join(pad + _pretty(item, indent, depth + 1) for item in value)
        return "[\n" + items + "\n" + end + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        members = ",\n".join(
            f"{pad}{_string(str(k))}: {_pretty(v, indent, depth + 1)}" for k, v in value.items()
        )
        return "{\n" + members + "\n" + end + "}"
    return _scalar(value)


# What ``json.dumps(text, ensure_ascii=False)`` returns, without building an encoder per call.
_string = json.encoder.encode_basestring  # type: ignore[attr-defined]


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | Decimal):
        return str(value)
    if isinstance(value, str):
        return _string(value)
    raise TypeError(f"cannot render {type(value).__name__} as JSON")
