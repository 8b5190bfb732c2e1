"""The bodies of the recovery writes, parsed and checked against every static rule.

Static means "decidable from the request alone" (O3): shape, types, lengths, formats, ranges.
Rules that need the task or the clock (revision, state, attempt timeout, times relative to now)
are the services' business.
"""

import hashlib
import unicodedata
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orbit_console.ledger.errors import InvalidArgument
from orbit_console.lib import strictjson
from orbit_console.lib.rfc3339 import TimeFormatError, parse_utc

MAX_BODY_BYTES = 512 * 1024  # C6
MAX_RESULT_BYTES = 256 * 1024  # RV3, O5
MAX_REASON_CHARS = 1024  # C10
MAX_EVIDENCE_REF_CHARS = 512  # C10
MAX_TASK_TIMEOUT_MS = 2_592_000_000  # RT2: 30 days
MAX_REVISION = 2**64 - 1  # O5
REVIEW_OUTCOMES = ("SUCCEEDED", "FAILED")


@dataclass(frozen=True, slots=True)
class ReviewRequest:
    expected_revision: int
    reason: str
    evidence_ref: str
    outcome: str
    result: str  # the exact JSON text received
    digest: str


@dataclass(frozen=True, slots=True)
class RetryRequest:
    expected_revision: int
    reason: str
    evidence_ref: str
    task_timeout_ms: int
    available_at: datetime | None
    start_deadline_at: datetime | None
    digest: str


def _invalid(field: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"{field}: {message}", field=field)


def _members(body: bytes, allowed: set[str], required: set[str]) -> dict[str, strictjson.Member]:
    if len(body) > MAX_BODY_BYTES:
        raise InvalidArgument(f"the body is larger than {MAX_BODY_BYTES} bytes")
    try:
        members = strictjson.parse_object(body)
    except strictjson.JSONError as exc:
        raise InvalidArgument(f"malformed body: {exc}") from None
    unknown = sorted(set(members) - allowed)
    if unknown:
        raise InvalidArgument(f"unknown field(s): {', '.join(unknown)}", field=unknown[0])
    missing = sorted(required - set(members))
    if missing:
        raise InvalidArgument(f"missing required field(s): {', '.join(missing)}", field=missing[0])
    return members


def _digest(members: dict[str, strictjson.Member]) -> str:
    canonical = strictjson.canonical({name: member.value for name, member in members.items()})
    return hashlib.sha256(canonical.encode()).hexdigest()


def _string(field: str, value: Any) -> str:
    if value is None:
        raise _invalid(field, "must not be null")
    if not isinstance(value, str):
        raise _invalid(field, "must be a string")
    return value


def parse_revision(value: Any) -> int:
    """C5: a non-zero decimal string without sign, padding or leading zeros."""
    text = _string("expected_revision", value)
    if not text or not text.isascii() or not text.isdigit() or text[0] == "0":
        raise _invalid("expected_revision", 'must be a non-zero decimal string such as "4"')
    number = int(text)
    if number > MAX_REVISION:
        raise _invalid("expected_revision", "is beyond the unsigned 64-bit range")
    return number


def parse_reason(value: Any) -> str:
    """C10, O6: 1-1024 code points, not all whitespace, no NUL."""
    text = _string("reason", value)
    if not 1 <= len(text) <= MAX_REASON_CHARS:
        raise _invalid("reason", f"must be 1 to {MAX_REASON_CHARS} characters")
    if text.isspace():
        raise _invalid("reason", "must not be blank")
    if "\x00" in text:
        raise _invalid("reason", "must not contain NUL")
    return text


def parse_evidence_ref(value: Any) -> str:
    """C10, O6: 1-512 code points, no whitespace, no control (Cc) or format (Cf) characters."""
    text = _string("evidence_ref", value)
    if not 1 <= len(text) <= MAX_EVIDENCE_REF_CHARS:
        raise _invalid("evidence_ref", f"must be 1 to {MAX_EVIDENCE_REF_CHARS} characters")
    for char in text:
        if char.isspace():
            raise _invalid("evidence_ref", "must not contain whitespace")
        if unicodedata.category(char) in ("Cc", "Cf"):
            raise _invalid("evidence_ref", "must not contain control or format characters")
    return text


def _confirmation(field: str, value: Any, meaning: str) -> None:
    if value is None:
        raise _invalid(field, "must not be null")
    if not isinstance(value, bool):
        raise _invalid(field, "must be the boolean true")
    if value is not True:
        raise _invalid(field, f"must be true: {meaning}")


def _time(field: str, value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise _invalid(field, "must be a string or null")
    try:
        return parse_utc(value)
    except TimeFormatError as exc:
        raise _invalid(field, str(exc)) from None


def parse_review(body: bytes) -> ReviewRequest:
    """RV3."""
    fields = {
        "expected_revision",
        "reason",
        "evidence_ref",
        "execution_settled",
        "outcome",
        "result",
    }
    members = _members(body, allowed=fields, required=fields)
    revision = parse_revision(members["expected_revision"].value)
    reason = parse_reason(members["reason"].value)
    evidence_ref = parse_evidence_ref(members["evidence_ref"].value)
    _confirmation(
        "execution_settled",
        members["execution_settled"].value,
        "confirm that every earlier execution has ended and will have no further effect",
    )
    outcome = _string("outcome", members["outcome"].value)
    if outcome not in REVIEW_OUTCOMES:
        raise _invalid("outcome", "must be SUCCEEDED or FAILED")
    result = members["result"]
    if result.value is None:
        raise _invalid("result", "must not be null")
    if len(result.raw.encode()) > MAX_RESULT_BYTES:
        raise _invalid("result", f"is larger than {MAX_RESULT_BYTES} bytes")
    return ReviewRequest(
        expected_revision=revision,
        reason=reason,
        evidence_ref=evidence_ref,
        outcome=outcome,
        result=result.raw,
        digest=_digest(members),
    )


def parse_retry(body: bytes) -> RetryRequest:
    """RT2, RT3 (the static part: formats and ranges)."""
    required = {"expected_revision", "reason", "evidence_ref", "safe_to_retry", "task_timeout_ms"}
    members = _members(
        body, allowed=required | {"available_at", "start_deadline_at"}, required=required
    )
    revision = parse_revision(members["expected_revision"].value)
    reason = parse_reason(members["reason"].value)
    evidence_ref = parse_evidence_ref(members["evidence_ref"].value)
    _confirmation(
        "safe_to_retry",
        members["safe_to_retry"].value,
        "confirm that the earlier execution has ended and running it again is safe",
    )
    timeout = members["task_timeout_ms"].value
    if timeout is None:
        raise _invalid("task_timeout_ms", "must not be null")
    if isinstance(timeout, bool) or not isinstance(timeout, int):
        raise _invalid("task_timeout_ms", "must be an integer number of milliseconds")
    if not 1 <= timeout <= MAX_TASK_TIMEOUT_MS:
        raise _invalid("task_timeout_ms", f"must be between 1 and {MAX_TASK_TIMEOUT_MS}")
    available = members.get("available_at")
    deadline = members.get("start_deadline_at")
    return RetryRequest(
        expected_revision=revision,
        reason=reason,
        evidence_ref=evidence_ref,
        task_timeout_ms=timeout,
        available_at=_time("available_at", available.value) if available else None,
        start_deadline_at=_time("start_deadline_at", deadline.value) if deadline else None,
        digest=_digest(members),
    )
