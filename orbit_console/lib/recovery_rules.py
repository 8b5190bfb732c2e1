"""The static rules of the recovery API's text fields (C5, C10, O5, O6).

Shared by the ledger, which enforces them, and the console, which explains them inline before
anything is sent. Each check returns the text it accepts or raises ``RuleError`` with a message
a person can act on.
"""

import unicodedata
from typing import Any

from django.utils.translation import gettext_noop as _

from orbit_console.lib.explained import Explained
from orbit_console.lib.numbers import NotAnInteger, OutOfRange, decimal_in, integer_in

MAX_REASON_CHARS = 1024  # C10
MAX_EVIDENCE_REF_CHARS = 512  # C10
MAX_RESULT_BYTES = 256 * 1024  # RV3, O5
MAX_TASK_TIMEOUT_MS = 2_592_000_000  # RT2: 30 days
MAX_REVISION = 2**64 - 1  # O5


class RuleError(Explained):
    """A value breaks a rule: ``str()`` in English (the API), ``translated()`` for pages."""


def check_revision(text: str) -> int:
    """C5: a non-zero decimal string without sign, padding or leading zeros."""
    if not text or not text.isascii() or not text.isdigit() or text[0] == "0":
        raise RuleError(_('must be a non-zero decimal string such as "4"'))
    try:
        return decimal_in(text, 1, MAX_REVISION)
    except OutOfRange:
        raise RuleError(_("is beyond the unsigned 64-bit range")) from None


def check_reason(text: str) -> str:
    """C10, O6: 1-1024 code points, not all whitespace, no NUL."""
    if not 1 <= len(text) <= MAX_REASON_CHARS:
        raise RuleError(_("must be 1 to %(max)s characters"), max=MAX_REASON_CHARS)
    if text.isspace():
        raise RuleError(_("must not be blank"))
    if "\x00" in text:
        raise RuleError(_("must not contain NUL"))
    return text


def check_evidence_ref(text: str) -> str:
    """C10, O6: 1-512 code points, no whitespace, no control (Cc) or format (Cf) characters."""
    if not 1 <= len(text) <= MAX_EVIDENCE_REF_CHARS:
        raise RuleError(_("must be 1 to %(max)s characters"), max=MAX_EVIDENCE_REF_CHARS)
    for char in text:
        if char.isspace():
            raise RuleError(_("must not contain whitespace"))
        if unicodedata.category(char) in ("Cc", "Cf"):
            raise RuleError(_("must not contain control or format characters"))
    return text


def check_task_timeout_ms(value: Any) -> int:
    """RT2: a parsed JSON number, an integer written as one (``60000.0`` and ``6E4`` are
    refused), from 1 to 30 days; judged on its size before it is converted (lib/numbers.py)."""
    try:
        return integer_in(value, 1, MAX_TASK_TIMEOUT_MS, written_as_integer=True)
    except NotAnInteger:
        raise RuleError(_("must be an integer number of milliseconds")) from None
    except OutOfRange:
        raise RuleError(_("must be between 1 and %(max)s"), max=MAX_TASK_TIMEOUT_MS) from None
