"""Regular expressions that administrators and people supply, matched in linear time.

Python's ``re`` backtracks: a pattern such as ``(a+)+`` takes time exponential in the text it
is tried on, so one administrator's pattern could hold every page that checks a reference
(issue 41: a 26-character reference took 6.3 s, doubling per character). Every pattern the
console did not write itself is compiled here, by RE2 (``google-re2``), whose matching time is
linear in the text whatever the pattern. What RE2 cannot express in linear time —
backreferences, lookaround, atomic groups, possessive quantifiers — is refused when the pattern
is set, with the construct named. The syntax is RE2's (https://github.com/google/re2/wiki/Syntax),
Python's but for those constructs, ``\\z`` for ``\\Z``, and ``\\d``, ``\\w``, ``\\s``, ``\\b``
meaning their ASCII classes.
"""

import re
from typing import Any, Protocol

import re2

SYNTAX = "https://github.com/google/re2/wiki/Syntax"

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # refusals are told to the person who typed the pattern, not logged

# RE2's complaint (its fragment) -> the construct, named for the person who wrote it.
_OPERATORS = {
    "(?=": "a lookahead (?=...)",
    "(?!": "a negative lookahead (?!...)",
    "(?<=": "a lookbehind (?<=...)",
    "(?<!": "a negative lookbehind (?<!...)",
    "(?>": "an atomic group (?>...)",
    "(?(": "a conditional group (?(...)...)",
    "(?#": "a comment group (?#...)",
    "(?|": "a branch reset group (?|...)",
}
_COMPLAINT = re.compile(r"(?P<what>[^:]+): (?P<fragment>.*)", re.DOTALL)


class Pattern(Protocol):
    """A compiled pattern (RE2's, with the ``re`` module's methods)."""

    def fullmatch(self, text: str) -> Any: ...

    def search(self, text: str) -> Any: ...


class PatternRefused(ValueError):
    """The pattern cannot be matched in linear time, or is no pattern: the message says why."""


def linear(pattern: str) -> Pattern:
    """``pattern`` compiled by RE2 (cached); ``PatternRefused`` naming what RE2 cannot do."""
    if _any_byte(pattern):
        raise PatternRefused(
            f"RE2 cannot use \\C (any byte) on text: it would split a character ({SYNTAX})"
        )
    try:
        compiled: Pattern = re2.compile(pattern, _OPTIONS)
    except re2.error as error:
        raise PatternRefused(_explained(pattern, error)) from None
    return compiled


def _explained(pattern: str, error: Exception) -> str:
    raw = error.args[0] if error.args else ""
    text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
    found = _COMPLAINT.fullmatch(text)
    what, fragment = (found["what"], found["fragment"]) if found else (text, "")
    construct = ""
    if what == "invalid perl operator":
        if fragment == "(?P" and "(?P=" in pattern:
            construct = "a named backreference (?P=name)"
        else:
            construct = _OPERATORS.get(fragment, f"the group {fragment}...)")
    elif what == "invalid escape sequence" and fragment[1:].isdigit():
        construct = f"a backreference {fragment}"
    elif what == "invalid escape sequence" and fragment == "\\Z":
        construct = "\\Z (write the end of the text as \\z)"
    elif what == "bad repetition operator" and fragment.endswith("+"):
        construct = f"a possessive quantifier {fragment}"
    elif what == "invalid repetition size":
        construct = f"a repetition over 1000 {fragment}"
    elif what == "pattern too large - compile failed":
        construct = "a pattern this large"
    if construct:
        return f"RE2 cannot express {construct}: patterns are matched in linear time ({SYNTAX})"
    return f"not a regular expression: {text} ({SYNTAX})"


def _any_byte(pattern: str) -> bool:
    """Whether ``pattern`` holds RE2's ``\\C`` (one byte: part of a character on text)."""
    escaped = False
    for char in pattern:
        if escaped and char == "C":
            return True
        escaped = not escaped and char == "\\"
    return False
