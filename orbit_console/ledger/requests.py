"""The bodies of the recovery writes, parsed and checked against every static rule.

Static means "decidable from the request alone" (O3): shape, types, lengths, formats, ranges.
Rules that need the task or the clock (revision, state, attempt timeout, times relative to now)
are the services' business.
"""

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from orbit_console.ledger.errors import InvalidArgument
from orbit_console.lib import strictjson
from orbit_console.lib.recovery_rules import (
    MAX_RESULT_BYTES,
    RuleError,
    check_evidence_ref,
    check_reason,
    check_revision,
    check_task_timeout_ms,
)
from orbit_console.lib.rfc3339 import TimeFormatError, parse_utc

MAX_BODY_BYTES = 512 * 1024  # C6
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


def invalid_field(field: str, message: str) -> InvalidArgument:
    return InvalidArgument(f"{field}: {message}", field=field)


def body_members(
    body: bytes, allowed: set[str], required: set[str]
) -> dict[str, strictjson.Member]:
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


def body_digest(members: dict[str, strictjson.Member]) -> str:
    canonical = strictjson.canonical({name: member.value for name, member in members.items()})
    return hashlib.sha256(canonical.encode()).hexdigest()


def string_field(field: str, value: Any) -> str:
    if value is None:
        raise invalid_field(field, "must not be null")
    if not isinstance(value, str):
        raise invalid_field(field, "must be a string")
    return value


def _rule(field: str, check: Callable[[Any], Any], value: Any) -> Any:
    try:
        return check(value)
    except RuleError as exc:
        raise invalid_field(field, str(exc)) from None


def parse_revision(value: Any) -> int:
    return _rule("expected_revision", check_revision, string_field("expected_revision", value))


def parse_reason(value: Any) -> str:
    return _rule("reason", check_reason, string_field("reason", value))


def parse_evidence_ref(value: Any) -> str:
    return _rule("evidence_ref", check_evidence_ref, string_field("evidence_ref", value))


def _confirmation(field: str, value: Any, meaning: str) -> None:
    if value is None:
        raise invalid_field(field, "must not be null")
    if not isinstance(value, bool):
        raise invalid_field(field, "must be the boolean true")
    if value is not True:
        raise invalid_field(field, f"must be true: {meaning}")


def _time(field: str, value: Any) -> datetime | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise invalid_field(field, "must be a string or null")
    try:
        return parse_utc(value)
    except TimeFormatError as exc:
        raise invalid_field(field, str(exc)) from None


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
    members = body_members(body, allowed=fields, required=fields)
    revision = parse_revision(members["expected_revision"].value)
    reason = parse_reason(members["reason"].value)
    evidence_ref = parse_evidence_ref(members["evidence_ref"].value)
    _confirmation(
        "execution_settled",
        members["execution_settled"].value,
        "confirm that every earlier execution has ended and will have no further effect",
    )
    outcome = string_field("outcome", members["outcome"].value)
    if outcome not in REVIEW_OUTCOMES:
        raise invalid_field("outcome", "must be SUCCEEDED or FAILED")
    result = members["result"]
    if result.value is None:
        raise invalid_field("result", "must not be null")
    if len(result.raw.encode()) > MAX_RESULT_BYTES:
        raise invalid_field("result", f"is larger than {MAX_RESULT_BYTES} bytes")
    return ReviewRequest(
        expected_revision=revision,
        reason=reason,
        evidence_ref=evidence_ref,
        outcome=outcome,
        result=result.raw,
        digest=body_digest(members),
    )


def parse_retry(body: bytes) -> RetryRequest:
    """RT2, RT3 (the static part: formats and ranges)."""
    required = {"expected_revision", "reason", "evidence_ref", "safe_to_retry", "task_timeout_ms"}
    members = body_members(
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
        raise invalid_field("task_timeout_ms", "must not be null")
    timeout = _rule("task_timeout_ms", check_task_timeout_ms, timeout)
    available = members.get("available_at")
    deadline = members.get("start_deadline_at")
    return RetryRequest(
        expected_revision=revision,
        reason=reason,
        evidence_ref=evidence_ref,
        task_timeout_ms=timeout,
        available_at=_time("available_at", available.value) if available else None,
        start_deadline_at=_time("start_deadline_at", deadline.value) if deadline else None,
        digest=body_digest(members),
    )
