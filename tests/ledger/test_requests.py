"""orbit_console.ledger.requests: the static rules of the review and retry bodies (C5, C6, C10,
O4, O5, O6, RV3, RT2, RT3). Unit tests: these rules are decidable from the body alone."""

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from orbit_console.ledger.errors import InvalidArgument
from orbit_console.ledger.requests import (
    MAX_BODY_BYTES,
    MAX_RESULT_BYTES,
    RetryRequest,
    ReviewRequest,
    parse_retry,
    parse_review,
)

REVIEW: dict[str, Any] = {
    "expected_revision": "3",
    "reason": "Checked the object store: the write never happened",
    "evidence_ref": "evidence:reconciliation-001",
    "execution_settled": True,
    "outcome": "FAILED",
    "result": {"confirmed": True, "sequence": 9007199254740993},
}
RETRY: dict[str, Any] = {
    "expected_revision": "3",
    "reason": "The earlier execution has ended; running it again is safe",
    "evidence_ref": "evidence:safe-retry-001",
    "safe_to_retry": True,
    "task_timeout_ms": 60000,
}
REVIEW_TEXT = (
    '{"expected_revision":"3","reason":"r","evidence_ref":"e","execution_settled":true,'
    '"outcome":"FAILED","result":RESULT}'
)

Parser = Callable[[bytes], Any]
PARSERS: list[tuple[Parser, dict[str, Any]]] = [(parse_review, REVIEW), (parse_retry, RETRY)]
BOTH = pytest.mark.parametrize(("parse", "base"), PARSERS, ids=["review", "retry"])


def _body(base: dict[str, Any], **changes: Any) -> bytes:
    body = dict(base)
    for name, value in changes.items():
        if value is _ABSENT:
            body.pop(name, None)
        else:
            body[name] = value
    return json.dumps(body, ensure_ascii=False).encode()


_ABSENT = object()


def _review_with_result(result_text: str) -> bytes:
    return REVIEW_TEXT.replace("RESULT", result_text).encode()


def _refused(parse: Parser, body: bytes, field: str | None) -> InvalidArgument:
    with pytest.raises(InvalidArgument) as raised:
        parse(body)
    error = raised.value
    assert error.status == 400 and error.code == "INVALID_ARGUMENT"
    assert error.details.get("field") == field
    if field is not None:
        assert field in error.message
    return error


# --- the happy paths ---------------------------------------------------------------------------


def test_parse_review_reads_every_field_RV3() -> None:
    request = parse_review(_body(REVIEW, outcome="SUCCEEDED"))
    assert isinstance(request, ReviewRequest)
    assert request.expected_revision == 3
    assert request.reason == REVIEW["reason"]
    assert request.evidence_ref == REVIEW["evidence_ref"]
    assert request.outcome == "SUCCEEDED"
    assert request.result == '{"confirmed": true, "sequence": 9007199254740993}'
    assert len(request.digest) == 64 and int(request.digest, 16) >= 0


@pytest.mark.parametrize(
    "result",
    [
        '{"n": 9007199254740993}',
        "0.10",
        "1E+2",
        "-0",
        "[ 1 ,\n 2 ]",
        '"text with \\u00e9 and \\n"',
        "false",
        "0",
        '""',
        "[]",
        "{}",
    ],
)
def test_parse_review_keeps_result_text_exactly_RV3(result: str) -> None:
    assert parse_review(_review_with_result(result)).result == result


def test_parse_retry_reads_every_field_RT2() -> None:
    request = parse_retry(
        _body(
            RETRY,
            task_timeout_ms=2_592_000_000,
            available_at="2030-01-02T03:04:05.5Z",
            start_deadline_at="2030-01-02T04:00:00Z",
        )
    )
    assert isinstance(request, RetryRequest)
    assert request.expected_revision == 3
    assert request.reason == RETRY["reason"]
    assert request.evidence_ref == RETRY["evidence_ref"]
    assert request.task_timeout_ms == 2_592_000_000
    assert request.available_at == datetime(2030, 1, 2, 3, 4, 5, 500_000, tzinfo=UTC)
    assert request.start_deadline_at == datetime(2030, 1, 2, 4, tzinfo=UTC)


def test_parse_retry_times_are_optional_RT2() -> None:
    request = parse_retry(_body(RETRY))
    assert request.available_at is None and request.start_deadline_at is None


def test_parse_retry_accepts_null_times_RT2() -> None:
    request = parse_retry(_body(RETRY, available_at=None, start_deadline_at=None))
    assert request.available_at is None and request.start_deadline_at is None


def test_parse_retry_timeout_bounds_are_inclusive_RT2() -> None:
    assert parse_retry(_body(RETRY, task_timeout_ms=1)).task_timeout_ms == 1
    assert parse_retry(_body(RETRY, task_timeout_ms=2_592_000_000)).task_timeout_ms == 2_592_000_000


# --- C5: expected_revision -----------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize("revision", ["1", "4", "10", "18446744073709551615"])
def test_expected_revision_accepts_non_zero_decimal_strings_C5(
    parse: Parser, base: dict[str, Any], revision: str
) -> None:
    assert parse(_body(base, expected_revision=revision)).expected_revision == int(revision)


@BOTH
@pytest.mark.parametrize(
    "revision",
    [
        "0",
        "00",
        "01",
        "+1",
        "-1",
        " 1",
        "1 ",
        "1.0",
        "1e2",
        "0x1",
        "",
        "\u0661",  # ARABIC-INDIC DIGIT ONE: a digit, but not ASCII
        "\uff11",  # FULLWIDTH DIGIT ONE
        "\u00b9",  # SUPERSCRIPT ONE
        "18446744073709551616",  # 2**64: beyond the unsigned 64-bit range (O5)
        "99999999999999999999999999999999",
        1,
        3,
        1.0,
        True,
        None,
        ["3"],
        {"revision": "3"},
    ],
)
def test_expected_revision_refuses_everything_else_C5_O5(
    parse: Parser, base: dict[str, Any], revision: Any
) -> None:
    _refused(parse, _body(base, expected_revision=revision), "expected_revision")


# --- C10 / O6: reason and evidence_ref -----------------------------------------------------------


@BOTH
@pytest.mark.parametrize(
    "reason",
    [
        "x",
        "r" * 1024,
        "\U0001f600" * 1024,  # code points, not UTF-16 units nor bytes
        "\u00e9" * 1024,
        "  leading and trailing whitespace are fine  ",
        "line one\nline two\ttab",
        "control \x01 characters other than NUL are allowed",
    ],
)
def test_reason_accepts_1_to_1024_code_points_C10(
    parse: Parser, base: dict[str, Any], reason: str
) -> None:
    assert parse(_body(base, reason=reason)).reason == reason


@BOTH
@pytest.mark.parametrize(
    "reason",
    [
        "",
        " ",
        "\t\n\r ",
        "\u3000",  # IDEOGRAPHIC SPACE: blank
        "\u00a0\u2028",
        "r" * 1025,
        "\U0001f600" * 1025,
        "before\x00after",
        "\x00",
        None,
        1,
        True,
        ["reason"],
    ],
)
def test_reason_refuses_blank_long_nul_and_non_strings_C10_O6(
    parse: Parser, base: dict[str, Any], reason: Any
) -> None:
    _refused(parse, _body(base, reason=reason), "reason")


@BOTH
@pytest.mark.parametrize(
    "ref",
    ["e", "e" * 512, "\u00e9" * 512, "s3://bucket/key?x=1#frag", "\u4e2d\u6587:\U0001f600"],
)
def test_evidence_ref_accepts_1_to_512_code_points_C10(
    parse: Parser, base: dict[str, Any], ref: str
) -> None:
    assert parse(_body(base, evidence_ref=ref)).evidence_ref == ref


@BOTH
@pytest.mark.parametrize(
    "ref",
    [
        "",
        "e" * 513,
        "\u00e9" * 513,
        "has space",
        "tab\there",
        "new\nline",
        " leading",
        "trailing ",
        "nbsp\u00a0here",
        "ideographic\u3000space",
        "line\u2028separator",
        "nul\x00",
        "bell\x07",
        "del\x7f",
        "c1\x85control",
        "zero\u200bwidth",  # ZERO WIDTH SPACE: format (Cf)
        "bidi\u202eoverride",  # RIGHT-TO-LEFT OVERRIDE: format (Cf)
        "soft\u00adhyphen",  # SOFT HYPHEN: format (Cf)
        "\ufeffbom",
        None,
        1,
        ["e"],
    ],
)
def test_evidence_ref_refuses_whitespace_controls_and_length_C10_O6(
    parse: Parser, base: dict[str, Any], ref: Any
) -> None:
    _refused(parse, _body(base, evidence_ref=ref), "evidence_ref")


# --- confirmations --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parse", "base", "field"),
    [(parse_review, REVIEW, "execution_settled"), (parse_retry, RETRY, "safe_to_retry")],
    ids=["review", "retry"],
)
@pytest.mark.parametrize("value", [False, None, "true", 1, 1.0, [True], {"ok": True}])
def test_confirmation_must_be_literally_true_RV3_RT2(
    parse: Parser, base: dict[str, Any], field: str, value: Any
) -> None:
    _refused(parse, _body(base, **{field: value}), field)


# --- RV3: outcome and result ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "outcome",
    ["succeeded", "Failed", "CANCELLED", "NEEDS_REVIEW", "UNKNOWN", " FAILED", "", None, 1, True],
)
def test_review_outcome_is_succeeded_or_failed_only_RV3(outcome: Any) -> None:
    _refused(parse_review, _body(REVIEW, outcome=outcome), "outcome")


def test_review_result_must_not_be_null_RV3() -> None:
    _refused(parse_review, _body(REVIEW, result=None), "result")
    _refused(parse_review, _review_with_result(" null "), "result")


def test_review_result_limit_is_256_kib_of_received_text_O5() -> None:
    filler = MAX_RESULT_BYTES - 2  # the two quotes
    exact = '"' + "x" * filler + '"'
    assert len(exact.encode()) == MAX_RESULT_BYTES == 256 * 1024
    assert parse_review(_review_with_result(exact)).result == exact
    _refused(parse_review, _review_with_result('"' + "x" * (filler + 1) + '"'), "result")


def test_review_result_limit_counts_utf8_bytes_not_characters_O5() -> None:
    text = '"' + "\u00e9" * (MAX_RESULT_BYTES // 2) + '"'  # fewer characters, too many bytes
    assert len(text) < MAX_RESULT_BYTES < len(text.encode())
    _refused(parse_review, _review_with_result(text), "result")


def test_review_result_limit_counts_whitespace_as_received_O5() -> None:
    """The same value spelled with more whitespace can cross the limit (measured as received)."""
    compact = "[" + ",".join(["1"] * (MAX_RESULT_BYTES // 2 - 1)) + "]"
    assert len(compact) < MAX_RESULT_BYTES
    parse_review(_review_with_result(compact))
    spaced = compact.replace(",", ", ")
    _refused(parse_review, _review_with_result(spaced), "result")


# --- RT2: task_timeout_ms ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "timeout",
    [0, -1, 2_592_000_001, 10**30, 60000.0, 1.5, "60000", True, False, None, [60000]],
)
def test_retry_task_timeout_must_be_an_integer_in_range_RT2(timeout: Any) -> None:
    _refused(parse_retry, _body(RETRY, task_timeout_ms=timeout), "task_timeout_ms")


@pytest.mark.parametrize("spelling", ["6E4", "60000.0", "6.0e4"])
def test_retry_task_timeout_spelled_as_decimal_is_refused_RT2(spelling: str) -> None:
    body = _body(RETRY).decode().replace("60000", spelling).encode()
    _refused(parse_retry, body, "task_timeout_ms")


# --- RT3: times (static part) -------------------------------------------------------------------


@pytest.mark.parametrize("field", ["available_at", "start_deadline_at"])
@pytest.mark.parametrize(
    "value",
    [
        "2030-01-01T00:00:00+00:00",
        "2030-01-01T08:00:00+08:00",
        "2030-01-01T00:00:00z",
        "2030-01-01 00:00:00Z",
        "2030-01-01T00:00:00.1234567Z",
        "2030-01-01T00:00Z",
        "1999-12-31T23:59:59Z",
        "9999-01-01T00:00:00Z",
        "2030-02-30T00:00:00Z",
        "",
        1893456000,
        True,
        ["2030-01-01T00:00:00Z"],
        {"at": "2030-01-01T00:00:00Z"},
    ],
)
def test_retry_times_must_be_utc_rfc3339_or_null_RT3(field: str, value: Any) -> None:
    _refused(parse_retry, _body(RETRY, **{field: value}), field)


# --- C6: body shape ---------------------------------------------------------------------------


@BOTH
@pytest.mark.parametrize(
    "extra", ["Reason", "REASON", "expected_Revision", "reason ", "note", "task_id", ""]
)
def test_unknown_fields_and_case_aliases_refused_C6(
    parse: Parser, base: dict[str, Any], extra: str
) -> None:
    error = _refused(parse, _body(base, **{extra: "x"}), extra)
    assert "unknown" in error.message


def test_review_refuses_retry_fields_and_retry_refuses_review_fields_C6() -> None:
    _refused(parse_review, _body(REVIEW, task_timeout_ms=60000), "task_timeout_ms")
    _refused(parse_review, _body(REVIEW, available_at=None), "available_at")
    _refused(parse_retry, _body(RETRY, outcome="FAILED"), "outcome")
    _refused(parse_retry, _body(RETRY, result={}), "result")


@pytest.mark.parametrize("missing", sorted(REVIEW))
def test_review_every_field_is_required_RV3(missing: str) -> None:
    error = _refused(parse_review, _body(REVIEW, **{missing: _ABSENT}), missing)
    assert "missing" in error.message


@pytest.mark.parametrize("missing", sorted(RETRY))
def test_retry_required_fields_RT2(missing: str) -> None:
    error = _refused(parse_retry, _body(RETRY, **{missing: _ABSENT}), missing)
    assert "missing" in error.message


@BOTH
@pytest.mark.parametrize(
    "body",
    [
        b"",
        b"[]",
        b"null",
        b'"text"',
        b"{",
        b'{"reason":"a","reason":"b"}',
        b"\xef\xbb\xbf{}",
        b'{"reason":"\xff"}',
        b'{"reason":"\\ud800"}',
        b'{"reason":NaN}',
        b"{} {}",
    ],
)
def test_malformed_bodies_refused_without_field_C6(
    parse: Parser, base: dict[str, Any], body: bytes
) -> None:
    error = _refused(parse, body, None)
    assert error.message.startswith("malformed body")


@BOTH
def test_duplicate_key_refused_even_with_the_same_value_C6(
    parse: Parser, base: dict[str, Any]
) -> None:
    text = _body(base).decode()
    body = text[:-1] + ',"reason":' + json.dumps(base["reason"]) + "}"
    _refused(parse, body.encode(), None)


def test_review_duplicate_key_inside_result_refused_C6() -> None:
    _refused(parse_review, _review_with_result('{"a":1,"a":1}'), None)


@BOTH
def test_body_larger_than_512_kib_refused_C6(parse: Parser, base: dict[str, Any]) -> None:
    body = _body(base)
    padded = body[:-1] + b" " * (MAX_BODY_BYTES - len(body) + 1) + b"}"
    assert len(padded) == MAX_BODY_BYTES + 1
    error = _refused(parse, padded, None)
    assert str(MAX_BODY_BYTES) in error.message
    exact = body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + b"}"
    assert len(exact) == MAX_BODY_BYTES
    parse(exact)


@BOTH
def test_deeply_nested_body_refused_as_invalid_argument_C6(
    parse: Parser, base: dict[str, Any]
) -> None:
    for depth in (200, 900, 5000):
        nested = "[" * depth + "1" + "]" * depth
        body = _body(base).decode()[:-1] + ',"nested":' + nested + "}"
        _refused(parse, body.encode(), None)


def test_review_deeply_nested_result_refused_as_invalid_argument_RV3() -> None:
    for depth in (200, 600, 900, 5000):
        _refused(parse_review, _review_with_result("[" * depth + "]" * depth), None)


@pytest.mark.parametrize("number", ["1e99999999999999999999", "-1e-99999999999999999999"])
def test_review_unreadable_numbers_refused_as_invalid_argument_RV3(number: str) -> None:
    _refused(parse_review, _review_with_result('{"n":' + number + "}"), None)


def test_review_integer_beyond_python_int_limit_kept_exactly_RV3() -> None:
    """RV3 takes any JSON: an integer longer than int() converts is kept as sent."""
    result = '{"n":' + "9" * 5000 + "}"
    assert parse_review(_review_with_result(result)).result == result


# --- O4: the digest that recognises replays ---------------------------------------------------


REVIEW_SPELLINGS = [
    '{"expected_revision":"3","reason":"r","evidence_ref":"e","execution_settled":true,'
    '"outcome":"FAILED","result":{"n":9007199254740993,"x":0.10,"y":[1,2]}}',
    # the same value: other key order at every level, other whitespace, other number spellings
    ' {\n  "result" : { "y" : [ 1 , 2.0 ], "x" : 1.0E-1 , "n" : 9007199254740993 } ,\n'
    '  "outcome":"FAILED", "execution_settled" : true,\t"evidence_ref":"e",\r\n'
    '  "reason":"\\u0072", "expected_revision":"\\u0033" } ',
    '{"outcome":"FAILED","result":{"x":0.1,"n":9.007199254740993e15,"y":[10e-1,20E-1]},'
    '"reason":"r","execution_settled":true,"expected_revision":"3","evidence_ref":"e"}',
]


@pytest.mark.parametrize("spelling", REVIEW_SPELLINGS[1:])
def test_review_digest_ignores_order_whitespace_and_number_spelling_O4(spelling: str) -> None:
    first = parse_review(REVIEW_SPELLINGS[0].encode())
    again = parse_review(spelling.encode())
    assert again.digest == first.digest
    assert again.result != first.result  # the text is kept as received all the same


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ('"expected_revision":"3"', '"expected_revision":"4"'),
        ('"reason":"r"', '"reason":"R"'),
        ('"reason":"r"', '"reason":"r "'),
        ('"evidence_ref":"e"', '"evidence_ref":"f"'),
        ('"outcome":"FAILED"', '"outcome":"SUCCEEDED"'),
        ('"n":9007199254740993', '"n":9007199254740992'),
        ('"x":0.10', '"x":0.11'),
        ('"x":0.10', '"x":"0.10"'),
        ('"y":[1,2]', '"y":[2,1]'),
        ('"y":[1,2]', '"y":[1,2,2]'),
        ('"y":[1,2]', '"y":[true,2]'),
        ('"y":[1,2]', '"y":[1,2],"z":null'),
        ('"n":9007199254740993', '"N":9007199254740993'),
    ],
)
def test_review_digest_differs_for_any_other_value_O4(old: str, new: str) -> None:
    original = REVIEW_SPELLINGS[0]
    assert old in original
    changed = original.replace(old, new)
    assert parse_review(changed.encode()).digest != parse_review(original.encode()).digest


def test_retry_digest_ignores_order_and_whitespace_O4() -> None:
    a = parse_retry(
        b'{"expected_revision":"3","reason":"r","evidence_ref":"e","safe_to_retry":true,'
        b'"task_timeout_ms":60000,"available_at":"2030-01-01T00:00:00Z"}'
    )
    b = parse_retry(
        b'{ "available_at" : "2030-01-01T00:00:00Z" , "task_timeout_ms" : 60000 ,\n'
        b'"safe_to_retry" : true , "evidence_ref" : "e" , "reason" : "r" ,'
        b' "expected_revision" : "3" }'
    )
    assert a.digest == b.digest


@pytest.mark.parametrize(
    "changes",
    [
        {"task_timeout_ms": 60001},
        {"reason": "another reason"},
        {"evidence_ref": "evidence:other"},
        {"expected_revision": "4"},
        {"available_at": "2030-01-01T00:00:00Z"},
        {"start_deadline_at": "2030-01-01T00:00:00Z"},
        {"start_deadline_at": None},  # null is written down, so it is a different body
    ],
)
def test_retry_digest_differs_for_any_other_value_O4(changes: dict[str, Any]) -> None:
    assert parse_retry(_body(RETRY, **changes)).digest != parse_retry(_body(RETRY)).digest


def test_retry_digest_compares_times_as_written_O4() -> None:
    """Times are strings in JSON: two spellings of one instant are two bodies."""
    a = parse_retry(_body(RETRY, available_at="2030-01-01T00:00:00Z"))
    b = parse_retry(_body(RETRY, available_at="2030-01-01T00:00:00.000Z"))
    assert a.available_at == b.available_at
    assert a.digest != b.digest


def test_review_and_retry_digests_are_deterministic_O4() -> None:
    assert parse_review(_body(REVIEW)).digest == parse_review(_body(REVIEW)).digest
    assert parse_retry(_body(RETRY)).digest == parse_retry(_body(RETRY)).digest
