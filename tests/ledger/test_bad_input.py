"""Malformed bodies for :review and :retry, table-driven: C6 (shape, size, encoding), C10 (text
rules), RV3 and RT2/RT3 (the static field rules), O5 and O6.

Every refused body must answer 400 INVALID_ARGUMENT (never a 5xx), leave the task, its audit,
its events and the namespace's idempotency records exactly as they were, and leave its
Idempotency-Key unused: the same key with a valid body then succeeds as a first request.
"""

import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from orbit_console.ledger.models import IdempotencyRecord, OperationAudit, Task, TaskEvent
from orbit_console.lib.rfc3339 import format_utc
from tests.support.orbit import bearer, new_key, post, retry_body, review_body
from tests.support.worlds import new_task, with_fresh_tasks

VERBS = ("review", "retry")
TARGET = {"review": "needs_review", "retry": "failed"}
ACCEPTED_STATUS = {"review": 200, "retry": 201}
KIB = 1024


@pytest.fixture(scope="module")
def shared_world(django_db_setup: None, django_db_blocker: Any) -> dict[str, Any]:
    from orbit_console.ledger.seed import seed_world

    with django_db_blocker.unblock():
        return seed_world(label="bad-input")


@pytest.fixture
def world(shared_world: dict[str, Any], live_db: None) -> dict[str, Any]:
    """The module's world, with tasks of this test's own to refuse bodies for and then accept
    one: every test here ends by reviewing or retrying them."""
    return with_fresh_tasks(shared_world, "needs_review", "failed")


# --- Building bodies --------------------------------------------------------------------------


def valid_body(verb: str) -> dict[str, Any]:
    return review_body() if verb == "review" else retry_body()


def build(
    verb: str,
    fields: dict[str, str] | None = None,
    *,
    drop: tuple[str, ...] = (),
    extra: tuple[str, ...] = (),
) -> bytes:
    """The valid body of ``verb`` as JSON text, with some members' raw JSON text replaced or
    added (``fields``), some dropped, and raw ``"name": value`` fragments appended (``extra``,
    which may repeat a name)."""
    members = {name: json.dumps(value) for name, value in valid_body(verb).items()}
    members.update(fields or {})
    parts = [f"{json.dumps(name)}: {raw}" for name, raw in members.items() if name not in drop]
    return ("{" + ", ".join([*parts, *extra]) + "}").encode()


def raw(value: Any) -> str:
    """JSON text of a Python value, non-ASCII characters kept as UTF-8, not escaped."""
    return json.dumps(value, ensure_ascii=False)


def with_bytes(verb: str, field: str, inner: bytes) -> bytes:
    """The valid body with ``field``'s string holding raw (possibly invalid) bytes."""
    return build(verb, {field: '"a@@b"'}).replace(b"@@", inner)


def padded(body: bytes, size: int) -> bytes:
    """``body`` followed by whitespace up to exactly ``size`` bytes: still valid JSON."""
    assert len(body) <= size
    return body + b" " * (size - len(body))


def string_of_bytes(size: int, char: str = "a") -> str:
    """A JSON string literal whose text is exactly ``size`` UTF-8 bytes, quotes included."""
    unit = len(char.encode())
    count, rest = divmod(size - 2, unit)
    return '"' + char * count + "a" * rest + '"'


# --- The tables -------------------------------------------------------------------------------


def common_cases(verb: str) -> dict[str, bytes]:
    """Bodies refused by both endpoints (C6, C10, C5)."""
    valid = build(verb)
    text = valid.decode()
    cases: dict[str, bytes] = {
        # Encoding (C6): UTF-8 only, no byte-order mark.
        "invalid_utf8_ff": with_bytes(verb, "reason", b"\xff"),
        "invalid_utf8_overlong": with_bytes(verb, "reason", b"\xc0\xaf"),
        "invalid_utf8_encoded_surrogate": with_bytes(verb, "reason", b"\xed\xa0\x80"),
        "invalid_utf8_truncated": with_bytes(verb, "reason", b"\xe7\x95"),
        "invalid_utf8_latin1": with_bytes(verb, "evidence_ref", "\u00e9".encode("latin-1")),
        "invalid_utf8_in_name": valid.replace(b'"reason"', b'"reas\xffon"'),
        "utf16_body": text.encode("utf-16"),
        "utf8_bom": b"\xef\xbb\xbf" + valid,
        # Top level (C6): one JSON object and nothing else.
        "top_array": b"[" + valid + b"]",
        "top_string": json.dumps(text).encode(),
        "top_number": b"42",
        "top_null": b"null",
        "top_true": b"true",
        "empty_body": b"",
        "whitespace_body": b" \r\n\t ",
        "empty_object": b"{}",
        "trailing_garbage": valid + b"x",
        "trailing_second_object": valid + b"{}",
        "trailing_comma_after": valid + b",",
        "trailing_nul": valid + b"\x00",
        "trailing_comment": valid + b" // done",
        "leading_garbage": b"x" + valid,
        "leading_comment": b"/* c */" + valid,
        "truncated": valid[:-1],
        "trailing_comma_inside": valid[:-1] + b",}",
        "single_quotes": valid.replace(b'"', b"'"),
        "unquoted_names": b"{"
        + b", ".join(f"{n}: {raw(v)}".encode() for n, v in valid_body(verb).items())
        + b"}",
        "deep_array_top": b"[" * 100_000,
        "deep_array_top_balanced": b"[" * 100_000 + b"]" * 100_000,
        # Members (C6): no duplicates, no case aliases, no unknown fields, no missing ones.
        "duplicate_reason": build(verb, extra=('"reason": "another reason"',)),
        "duplicate_same_value": build(
            verb, extra=(f'"reason": {raw(valid_body(verb)["reason"])}',)
        ),
        "duplicate_revision": build(verb, extra=('"expected_revision": "3"',)),
        "duplicate_by_escape": build(verb, extra=('"re\\u0061son": "x"',)),
        "alias_Reason_added": build(verb, extra=('"Reason": "x"',)),
        "alias_Reason_instead": build(
            verb, drop=("reason",), extra=(f'"Reason": {raw(valid_body(verb)["reason"])}',)
        ),
        "alias_EXPECTED_REVISION": build(
            verb, drop=("expected_revision",), extra=('"EXPECTED_REVISION": "3"',)
        ),
        "alias_evidenceRef": build(verb, drop=("evidence_ref",), extra=('"evidenceRef": "e:1"',)),
        "unknown_field": build(verb, extra=('"note": "x"',)),
        "unknown_field_null": build(verb, extra=('"note": null',)),
        "unknown_field_name_with_space": build(verb, extra=('"reason ": "x"',)),
        "unknown_field_empty_name": build(verb, extra=('"": 1',)),
        "unknown_actor_id": build(verb, extra=(f'"actor_id": "{"a" * 32}"',)),
        "unknown_task_id": build(verb, extra=(f'"task_id": "{"b" * 32}"',)),
        "unknown_lone_surrogate_name": build(verb, extra=('"\\ud800": 1',)),
        # expected_revision (C5) in the body's own table.
        "revision_number": build(verb, {"expected_revision": "3"}),
        "revision_nan": build(verb, {"expected_revision": "NaN"}),
        # reason (C10, O6).
        "reason_null": build(verb, {"reason": "null"}),
        "reason_number": build(verb, {"reason": "5"}),
        "reason_true": build(verb, {"reason": "true"}),
        "reason_array": build(verb, {"reason": '["x"]'}),
        "reason_object": build(verb, {"reason": '{"text": "x"}'}),
        "reason_empty": build(verb, {"reason": '""'}),
        "reason_space": build(verb, {"reason": '" "'}),
        "reason_whitespace_mix": build(verb, {"reason": raw("\t\n\r ")}),
        "reason_ideographic_space": build(verb, {"reason": raw("\u3000\u3000")}),
        "reason_nbsp_and_em_space": build(verb, {"reason": raw("\u00a0\u2003")}),
        "reason_1025_ascii": build(verb, {"reason": raw("a" * 1025)}),
        "reason_1025_cjk": build(verb, {"reason": raw("\u754c" * 1025)}),
        "reason_1025_emoji": build(verb, {"reason": raw("\U0001f600" * 1025)}),
        "reason_1025_escaped_emoji": build(verb, {"reason": json.dumps("\U0001f600" * 1025)}),
        "reason_nul_inside": build(verb, {"reason": '"a\\u0000b"'}),
        "reason_nul_only": build(verb, {"reason": '"\\u0000"'}),
        "reason_nan": build(verb, {"reason": "NaN"}),
        "reason_lone_high_surrogate": build(verb, {"reason": '"\\ud800"'}),
        "reason_lone_low_surrogate": build(verb, {"reason": '"x\\udc00"'}),
        "reason_two_high_surrogates": build(verb, {"reason": '"\\ud83d\\ud83d"'}),
        "reason_reversed_pair": build(verb, {"reason": '"\\ude00\\ud83d"'}),
        "reason_raw_control_char": build(verb, {"reason": '"a\tb"'}),
        "reason_deep_unterminated": build(verb, {"reason": "[" * 100_000}),
        "reason_deep_balanced": build(verb, {"reason": "[" * 100_000 + "]" * 100_000}),
        "reason_deep_objects": build(verb, {"reason": '{"a":' * 50_000 + "1" + "}" * 50_000}),
        # evidence_ref (C10, O6).
        "evidence_null": build(verb, {"evidence_ref": "null"}),
        "evidence_number": build(verb, {"evidence_ref": "1"}),
        "evidence_array": build(verb, {"evidence_ref": '["e:1"]'}),
        "evidence_empty": build(verb, {"evidence_ref": '""'}),
        "evidence_space": build(verb, {"evidence_ref": raw("e:1 2")}),
        "evidence_leading_space": build(verb, {"evidence_ref": raw(" e:1")}),
        "evidence_trailing_space": build(verb, {"evidence_ref": raw("e:1 ")}),
        "evidence_tab": build(verb, {"evidence_ref": raw("e:1\t2")}),
        "evidence_newline": build(verb, {"evidence_ref": raw("e:1\n2")}),
        "evidence_carriage_return": build(verb, {"evidence_ref": raw("e:1\r2")}),
        "evidence_nbsp": build(verb, {"evidence_ref": raw("e:1\u00a02")}),
        "evidence_ideographic_space": build(verb, {"evidence_ref": raw("e:1\u30002")}),
        "evidence_zero_width_space_Cf": build(verb, {"evidence_ref": raw("e:1\u200b2")}),
        "evidence_bom_Cf": build(verb, {"evidence_ref": raw("e:1\ufeff2")}),
        "evidence_rtl_override_Cf": build(verb, {"evidence_ref": raw("e:1\u202e2")}),
        "evidence_soft_hyphen_Cf": build(verb, {"evidence_ref": raw("e:1\u00ad2")}),
        "evidence_bell_Cc": build(verb, {"evidence_ref": raw("e:1\u00072")}),
        "evidence_delete_Cc": build(verb, {"evidence_ref": raw("e:1\u007f2")}),
        "evidence_next_line_Cc": build(verb, {"evidence_ref": raw("e:1\u00852")}),
        "evidence_nul": build(verb, {"evidence_ref": raw("e:1\u00002")}),
        "evidence_line_separator": build(verb, {"evidence_ref": raw("e:1\u20282")}),
        "evidence_paragraph_separator": build(verb, {"evidence_ref": raw("e:1\u20292")}),
        "evidence_513_ascii": build(verb, {"evidence_ref": raw("e" * 513)}),
        "evidence_513_cjk": build(verb, {"evidence_ref": raw("\u754c" * 513)}),
        "evidence_513_emoji": build(verb, {"evidence_ref": raw("\U0001f600" * 513)}),
        "evidence_lone_surrogate": build(verb, {"evidence_ref": '"e:\\udfff"'}),
        # Size (C6): at most 512 KiB, however the bytes are spent.
        "body_512KiB_plus_1_whitespace": padded(valid, 512 * KIB + 1),
        "body_3MiB_whitespace": padded(valid, 3 * KIB * KIB),
    }
    for field in ("expected_revision", "reason", "evidence_ref"):
        cases[f"missing_{field}"] = build(verb, drop=(field,))
        cases[f"null_{field}"] = build(verb, {field: "null"})
    return cases


def review_cases() -> dict[str, bytes]:
    """RV3: execution_settled, outcome and result."""
    v = "review"
    cases: dict[str, bytes] = {
        "settled_string_true": build(v, {"execution_settled": '"true"'}),
        "settled_one": build(v, {"execution_settled": "1"}),
        "settled_zero": build(v, {"execution_settled": "0"}),
        "settled_false": build(v, {"execution_settled": "false"}),
        "settled_null": build(v, {"execution_settled": "null"}),
        "settled_yes": build(v, {"execution_settled": '"yes"'}),
        "settled_array": build(v, {"execution_settled": "[true]"}),
        "settled_TRUE": build(v, {"execution_settled": "TRUE"}),
        "outcome_lowercase": build(v, {"outcome": '"succeeded"'}),
        "outcome_titlecase": build(v, {"outcome": '"Failed"'}),
        "outcome_cancelled": build(v, {"outcome": '"CANCELLED"'}),
        "outcome_needs_review": build(v, {"outcome": '"NEEDS_REVIEW"'}),
        "outcome_waiting": build(v, {"outcome": '"WAITING"'}),
        "outcome_unknown": build(v, {"outcome": '"UNKNOWN"'}),
        "outcome_padded": build(v, {"outcome": '" FAILED"'}),
        "outcome_trailing_space": build(v, {"outcome": '"FAILED "'}),
        "outcome_empty": build(v, {"outcome": '""'}),
        "outcome_number": build(v, {"outcome": "1"}),
        "outcome_null": build(v, {"outcome": "null"}),
        "outcome_array": build(v, {"outcome": '["FAILED"]'}),
        "outcome_fullwidth": build(v, {"outcome": raw("\uff26AILED")}),
        "result_null": build(v, {"result": "null"}),
        "result_duplicate_key": build(v, {"result": '{"a": 1, "a": 2}'}),
        "result_duplicate_key_same_value": build(v, {"result": '{"a": 1, "a": 1}'}),
        "result_duplicate_key_nested": build(v, {"result": '[{"k": {"x": 1, "y": 2, "x": 3}}]'}),
        "result_duplicate_key_by_escape": build(v, {"result": '{"a": 1, "\\u0061": 2}'}),
        "result_nan": build(v, {"result": "NaN"}),
        "result_infinity_in_array": build(v, {"result": "[Infinity]"}),
        "result_negative_infinity": build(v, {"result": '{"v": -Infinity}'}),
        "result_lone_surrogate_value": build(v, {"result": '{"k": "\\ud800"}'}),
        "result_lone_surrogate_key": build(v, {"result": '{"\\udbff": 1}'}),
        "result_undefined": build(v, {"result": "undefined"}),
        "result_single_quoted": build(v, {"result": "'x'"}),
        "result_leading_zero": build(v, {"result": "01"}),
        "result_bare_dot": build(v, {"result": "1."}),
        "result_leading_dot": build(v, {"result": ".5"}),
        "result_plus_sign": build(v, {"result": "+1"}),
        "result_hex": build(v, {"result": "0x10"}),
        "result_python_none": build(v, {"result": "None"}),
        "result_raw_newline_in_string": build(v, {"result": '"a\nb"'}),
        "result_invalid_escape": build(v, {"result": '"\\x41"'}),
        "result_deep_unterminated": build(v, {"result": "[" * 100_000}),
        "result_deep_balanced": build(v, {"result": "[" * 100_000 + "]" * 100_000}),
        "result_deep_objects": build(v, {"result": '{"a":' * 50_000 + "1" + "}" * 50_000}),
        # O5: 256 KiB on the result's JSON text as received.
        "result_262145_bytes_string": build(v, {"result": string_of_bytes(256 * KIB + 1)}),
        "result_262145_bytes_cjk": build(v, {"result": string_of_bytes(256 * KIB + 1, "\u754c")}),
        "result_262145_bytes_inner_whitespace": build(
            v, {"result": '{"a": 1' + " " * (256 * KIB + 1 - len('{"a": 1}')) + "}"}
        ),
        "missing_execution_settled": build(v, drop=("execution_settled",)),
        "missing_outcome": build(v, drop=("outcome",)),
        "missing_result": build(v, drop=("result",)),
        "retry_field_on_review": build(v, extra=('"safe_to_retry": true',)),
        "timeout_field_on_review": build(v, extra=('"task_timeout_ms": 60000',)),
    }
    return cases


BAD_TIMES = {
    "offset_plus_0800": "2030-01-01T08:00:00+08:00",
    "offset_plus_0000": "2030-01-01T00:00:00+00:00",
    "offset_minus_0000": "2030-01-01T00:00:00-00:00",
    "lowercase_z": "2030-01-01T00:00:00z",
    "lowercase_t": "2030-01-01t00:00:00Z",
    "seven_fraction_digits": "2030-01-01T00:00:00.1234567Z",
    "nine_fraction_digits": "2030-01-01T00:00:00.123456789Z",
    "dot_without_digits": "2030-01-01T00:00:00.Z",
    "comma_fraction": "2030-01-01T00:00:00,5Z",
    "year_1999": "1999-12-31T23:59:59Z",
    "year_9999": "9999-01-01T00:00:00Z",
    "year_0000": "0000-01-01T00:00:00Z",
    "missing_t": "2030-01-01 00:00:00Z",
    "no_zone": "2030-01-01T00:00:00",
    "date_only": "2030-01-01",
    "february_30": "2026-02-30T00:00:00Z",
    "month_13": "2030-13-01T00:00:00Z",
    "hour_24": "2030-01-01T24:00:00Z",
    "leap_second": "2030-12-31T23:59:60Z",
    "one_digit_month": "2030-1-01T00:00:00Z",
    "basic_format": "20300101T000000Z",
    "no_seconds": "2030-01-01T00:00Z",
    "leading_space": " 2030-01-01T00:00:00Z",
    "trailing_space": "2030-01-01T00:00:00Z ",
    "fullwidth_digits": "\uff12\uff10\uff13\uff10-01-01T00:00:00Z",
    "arabic_digits": "\u0662\u0660\u0663\u0660-01-01T00:00:00Z",
    "empty": "",
    "words": "tomorrow",
}


def retry_cases() -> dict[str, bytes]:
    """RT2, RT3: safe_to_retry, task_timeout_ms and the static shape of the times."""
    v = "retry"
    cases: dict[str, bytes] = {
        "safe_false": build(v, {"safe_to_retry": "false"}),
        "safe_string_true": build(v, {"safe_to_retry": '"true"'}),
        "safe_one": build(v, {"safe_to_retry": "1"}),
        "safe_null": build(v, {"safe_to_retry": "null"}),
        "safe_array": build(v, {"safe_to_retry": "[true]"}),
        "safe_True": build(v, {"safe_to_retry": "True"}),
        "timeout_string": build(v, {"task_timeout_ms": '"60000"'}),
        "timeout_float": build(v, {"task_timeout_ms": "60000.0"}),
        "timeout_fraction": build(v, {"task_timeout_ms": "60000.5"}),
        "timeout_exponent_1e4": build(v, {"task_timeout_ms": "1e4"}),
        "timeout_exponent_6E4": build(v, {"task_timeout_ms": "6E4"}),
        "timeout_zero": build(v, {"task_timeout_ms": "0"}),
        "timeout_negative_zero": build(v, {"task_timeout_ms": "-0"}),
        "timeout_negative": build(v, {"task_timeout_ms": "-1"}),
        "timeout_above_30_days": build(v, {"task_timeout_ms": "2592000001"}),
        "timeout_beyond_uint64": build(v, {"task_timeout_ms": "18446744073709551616"}),
        "timeout_5000_digits": build(v, {"task_timeout_ms": "9" * 5000}),
        "timeout_huge_exponent": build(v, {"task_timeout_ms": "1e99999999999999999999"}),
        "timeout_true": build(v, {"task_timeout_ms": "true"}),
        "timeout_false": build(v, {"task_timeout_ms": "false"}),
        "timeout_null": build(v, {"task_timeout_ms": "null"}),
        "timeout_array": build(v, {"task_timeout_ms": "[60000]"}),
        "timeout_nan": build(v, {"task_timeout_ms": "NaN"}),
        "timeout_infinity": build(v, {"task_timeout_ms": "Infinity"}),
        "timeout_leading_zero": build(v, {"task_timeout_ms": "060000"}),
        "timeout_plus": build(v, {"task_timeout_ms": "+60000"}),
        "missing_safe_to_retry": build(v, drop=("safe_to_retry",)),
        "missing_task_timeout_ms": build(v, drop=("task_timeout_ms",)),
        "available_at_number": build(v, {"available_at": "1893456000"}),
        "available_at_true": build(v, {"available_at": "true"}),
        "available_at_object": build(v, {"available_at": '{"at": "2030-01-01T00:00:00Z"}'}),
        "start_deadline_at_number": build(v, {"start_deadline_at": "0"}),
        "review_field_on_retry": build(v, extra=('"execution_settled": true',)),
        "outcome_on_retry": build(v, extra=('"outcome": "FAILED"',)),
        "result_on_retry": build(v, extra=('"result": {}',)),
    }
    for name, value in BAD_TIMES.items():
        cases[f"available_at_{name}"] = build(v, {"available_at": raw(value)})
    for name in (
        "offset_plus_0800",
        "lowercase_z",
        "seven_fraction_digits",
        "year_1999",
        "year_9999",
        "missing_t",
        "february_30",
        "no_zone",
    ):
        cases[f"start_deadline_at_{name}"] = build(v, {"start_deadline_at": raw(BAD_TIMES[name])})
    return cases


def all_cases() -> list[Any]:
    params = []
    for verb in VERBS:
        for name, body in common_cases(verb).items():
            params.append(pytest.param(verb, body, id=f"{verb}-{name}"))
    for name, body in review_cases().items():
        params.append(pytest.param("review", body, id=f"review-{name}"))
    for name, body in retry_cases().items():
        params.append(pytest.param("retry", body, id=f"retry-{name}"))
    return params


# --- Checking ---------------------------------------------------------------------------------


def ledger_state(namespace_id: str, task_id: str) -> dict[str, Any]:
    task = Task.objects.get(id=task_id)
    return {
        "task": (
            task.state,
            task.revision,
            task.result,
            task.updated_at,
            task.completed_at,
            task.effect_uncertain,
            task.attempt_count,
        ),
        "audits": OperationAudit.objects.filter(task_id=task_id).count(),
        "events": TaskEvent.objects.filter(task_id=task_id).count(),
        "receipts": IdempotencyRecord.objects.filter(namespace_id=namespace_id).count(),
        "successors": Task.objects.filter(retry_of=task_id).count(),
        "namespace_tasks": Task.objects.filter(namespace_id=namespace_id).count(),
    }


def assert_invalid_argument(response: httpx.Response) -> None:
    assert response.status_code < 500, response.text
    assert response.status_code == 400, response.text
    body = response.json()
    assert set(body) == {"request_id", "error"}
    assert body["error"]["code"] == "INVALID_ARGUMENT"
    assert body["error"]["message"]


@pytest.mark.parametrize(("verb", "body"), all_cases())
def test_malformed_body_is_refused_and_touches_nothing_C6_C10(
    api: httpx.Client, world: dict[str, Any], live_db: None, verb: str, body: bytes
) -> None:
    task_id = world["tasks"][TARGET[verb]]
    token = world["tokens"]["admin"]
    key = new_key()
    before = ledger_state(world["namespace_id"], task_id)

    response = post(api, task_id, verb, token, body, key=key)

    assert_invalid_argument(response)
    assert ledger_state(world["namespace_id"], task_id) == before
    # The key was not spent: the same key with a valid body is a first request.
    accepted = post(api, task_id, verb, token, valid_body(verb), key=key)
    assert accepted.status_code == ACCEPTED_STATUS[verb], accepted.text
    assert accepted.json()["data"]["deduplicated"] is False


def test_tables_are_anchored_on_a_valid_body() -> None:
    """Each malformed body differs from a body the server accepts; the builder must produce
    exactly that valid body when asked for no change."""
    for verb in VERBS:
        assert json.loads(build(verb)) == valid_body(verb)
    assert len(string_of_bytes(256 * KIB + 1, "\u754c").encode()) == 256 * KIB + 1
    assert len(string_of_bytes(256 * KIB).encode()) == 256 * KIB


# --- Edge values that must be accepted --------------------------------------------------------


def future(seconds: float) -> str:
    return format_utc(datetime.now(UTC) + timedelta(seconds=seconds))


def exact_future(seconds: float) -> str:
    """A time with exactly six fraction digits."""
    moment = datetime.now(UTC) + timedelta(seconds=seconds)
    return moment.replace(microsecond=123456).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


ACCEPTED_REVIEW: dict[str, Callable[[], bytes]] = {
    "reason_1024_cjk": lambda: build("review", {"reason": raw("\u754c" * 1024)}),
    "reason_1024_ascii": lambda: build("review", {"reason": raw("a" * 1024)}),
    "reason_1024_emoji": lambda: build("review", {"reason": raw("\U0001f600" * 1024)}),
    "reason_1024_escaped_emoji": lambda: build(
        "review", {"reason": json.dumps("\U0001f600" * 1024)}
    ),
    "reason_one_char": lambda: build("review", {"reason": '"x"'}),
    "reason_with_spaces_and_lines": lambda: build("review", {"reason": raw("  a\n\tb  ")}),
    "evidence_512_ascii": lambda: build("review", {"evidence_ref": raw("e" * 512)}),
    "evidence_512_emoji": lambda: build("review", {"evidence_ref": raw("\U0001f600" * 512)}),
    "evidence_512_cjk": lambda: build("review", {"evidence_ref": raw("\u754c" * 512)}),
    "evidence_url": lambda: build("review", {"evidence_ref": raw("https://x.test/a?b=1#c")}),
    "result_262144_bytes_string": lambda: build("review", {"result": string_of_bytes(256 * KIB)}),
    "result_262144_bytes_cjk": lambda: build(
        "review", {"result": string_of_bytes(256 * KIB, "\u754c")}
    ),
    "result_false": lambda: build("review", {"result": "false"}),
    "result_zero": lambda: build("review", {"result": "0"}),
    "result_empty_string": lambda: build("review", {"result": '""'}),
    "result_empty_array": lambda: build("review", {"result": "[]"}),
    "result_exact_numbers": lambda: build(
        "review", {"result": "[9007199254740993, 0.10, -0, 1E400]"}
    ),
    "result_nested_50": lambda: build("review", {"result": "[" * 50 + "]" * 50}),
    "result_escaped_pair": lambda: build("review", {"result": '{"k": "\\ud83d\\ude00"}'}),
    "outcome_succeeded": lambda: build("review", {"outcome": '"SUCCEEDED"'}),
    "body_exactly_512KiB": lambda: padded(
        build("review", {"result": string_of_bytes(256 * KIB)}), 512 * KIB
    ),
    "surrounding_whitespace": lambda: b"\r\n \t" + build("review") + b" \r\n",
    "members_reordered": lambda: json.dumps(dict(reversed(review_body().items()))).encode(),
}
ACCEPTED_RETRY: dict[str, Callable[[], bytes]] = {
    "timeout_equal_to_attempt_timeout": lambda: build("retry", {"task_timeout_ms": "10000"}),
    "timeout_30_days": lambda: build("retry", {"task_timeout_ms": "2592000000"}),
    "available_at_null": lambda: build("retry", {"available_at": "null"}),
    "start_deadline_at_null": lambda: build("retry", {"start_deadline_at": "null"}),
    "both_times_null": lambda: build(
        "retry", {"available_at": "null", "start_deadline_at": "null"}
    ),
    "available_at_six_fraction_digits": lambda: build(
        "retry", {"available_at": raw(exact_future(5))}
    ),
    "available_at_whole_seconds": lambda: build(
        "retry",
        {"available_at": raw(f"{datetime.now(UTC) + timedelta(seconds=5):%Y-%m-%dT%H:%M:%SZ}")},
    ),
    "start_deadline_at_future": lambda: build("retry", {"start_deadline_at": raw(future(30))}),
    "both_times": lambda: build(
        "retry", {"available_at": raw(future(5)), "start_deadline_at": raw(exact_future(30))}
    ),
    "reason_1024_cjk": lambda: build("retry", {"reason": raw("\u754c" * 1024)}),
    "evidence_512_emoji": lambda: build("retry", {"evidence_ref": raw("\U0001f600" * 512)}),
}


def accepted_cases() -> list[Any]:
    params = [pytest.param("review", make, id=f"review-{n}") for n, make in ACCEPTED_REVIEW.items()]
    params += [pytest.param("retry", make, id=f"retry-{n}") for n, make in ACCEPTED_RETRY.items()]
    return params


@pytest.mark.parametrize(("verb", "make"), accepted_cases())
def test_edge_values_within_the_rules_are_accepted_C6_C10(
    api: httpx.Client,
    world: dict[str, Any],
    live_db: None,
    verb: str,
    make: Callable[[], bytes],
) -> None:
    task_id = world["tasks"][TARGET[verb]]
    body = make()
    sent = json.loads(body)

    response = post(api, task_id, verb, world["tokens"]["admin"], body)

    assert response.status_code == ACCEPTED_STATUS[verb], response.text
    audit = OperationAudit.objects.get(id=response.json()["data"]["audit_id"])
    assert audit.reason == sent["reason"]  # stored code point for code point
    assert audit.evidence_ref == sent["evidence_ref"]
    if verb == "review":
        raw_result = Task.objects.get(id=task_id).result
        assert raw_result is not None and json.loads(raw_result) == sent["result"]
        assert f'"result": {raw_result}'.encode() in body  # stored as the very text received


def test_result_size_is_measured_on_the_text_as_received_O5(
    api: httpx.Client, world: dict[str, Any], live_db: None
) -> None:
    """Whitespace inside the result counts: 262144 bytes of text pass, one more does not,
    although both hold the same value."""
    token = world["tokens"]["admin"]
    second = new_task(world, "needs_review")

    def result_text(size: int) -> str:
        return '{"a": 1' + " " * (size - len('{"a": 1}')) + "}"

    over = post(
        api,
        world["tasks"]["needs_review"],
        "review",
        token,
        build("review", {"result": result_text(256 * KIB + 1)}),
    )
    exact = post(
        api,
        second,
        "review",
        token,
        build("review", {"result": result_text(256 * KIB)}),
    )

    assert_invalid_argument(over)
    assert exact.status_code == 200, exact.text
    assert Task.objects.get(id=second).result == result_text(256 * KIB)


# --- No input is a server error ---------------------------------------------------------------

ODD_RESULTS = [
    "1e99999999999999999999",
    "-1e-99999999999999999999",
    "1E400",
    "-0.0",
    "9" * 4300,
    "9" * 5000,
    "0." + "0" * 5000 + "1",
    "[" * 127 + "]" * 127,
    "[" * 128 + "]" * 128,
    "[" * 129 + "]" * 129,
    "[" * 900 + "]" * 900,
    "[" * 1200 + "]" * 1200,
    '{"a":' * 900 + "1" + "}" * 900,
    '"' + "\\u0000" * 1000 + '"',
    '"\\ud83d\\ude00\\ud800"',
    '{"\\u0000": "\\u0000"}',
    '"' + "\\\\" * 10_000 + '"',
]


@pytest.mark.parametrize("result", ODD_RESULTS, ids=lambda text: f"{text[:12]}..{len(text)}")
def test_odd_results_never_cause_a_server_error(
    api: httpx.Client, world: dict[str, Any], live_db: None, result: str
) -> None:
    """Bodies at the edge of what a JSON parser handles: accepted or 400, never a 5xx, and a
    refusal touches nothing."""
    task_id = world["tasks"]["needs_review"]
    before = ledger_state(world["namespace_id"], task_id)

    response = post(
        api, task_id, "review", world["tokens"]["admin"], build("review", {"result": result})
    )

    assert response.status_code in (200, 400), response.text
    if response.status_code == 400:
        assert_invalid_argument(response)
        assert ledger_state(world["namespace_id"], task_id) == before
    else:
        assert Task.objects.get(id=task_id).result == result


ODD_QUERIES = [
    "limit=" + "9" * 5000,
    "limit=" + "0" * 5000 + "1",
    "limit=99999999999999999999999",
    "limit=-1",
    "limit=0",
    "limit=101",
    "limit=1e2",
    "limit=%D9%A1",
    "limit=",
    "limit=1&limit=2",
    "cursor=",
    "cursor=" + "x" * 1025,
    "cursor=%FF%FE",
    "cursor=not-a-cursor",
    "unknown=1",
    "%FF=1",
]


@pytest.mark.parametrize("query", ODD_QUERIES, ids=lambda text: text[:24])
def test_odd_query_strings_are_invalid_not_server_errors_AU2(
    api: httpx.Client, world: dict[str, Any], query: str
) -> None:
    task_id = world["tasks"]["needs_review"]
    for path in ("/v1/tasks", f"/v1/tasks/{task_id}/operations", f"/v1/tasks/{task_id}/attempts"):
        response = api.get(f"{path}?{query}", headers=bearer(world["tokens"]["admin"]))
        assert_invalid_argument(response)


@pytest.mark.parametrize("verb", VERBS)
def test_query_string_on_a_write_is_invalid_C6(
    api: httpx.Client, world: dict[str, Any], live_db: None, verb: str
) -> None:
    task_id = world["tasks"][TARGET[verb]]
    before = ledger_state(world["namespace_id"], task_id)
    response = api.post(
        f"/v1/tasks/{task_id}:{verb}?force=true",
        content=json.dumps(valid_body(verb)),
        headers={
            **bearer(world["tokens"]["admin"]),
            "Content-Type": "application/json",
            "Idempotency-Key": new_key(),
        },
    )
    assert_invalid_argument(response)
    assert ledger_state(world["namespace_id"], task_id) == before
