"""orbit_console.lib.strictjson: the one strict, exact JSON reader and writer (C6, RV3, O4, I8)."""

import json
import pickle
import tracemalloc
from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orbit_console.lib.strictjson import (
    MAX_DEPTH,
    MAX_INT_DIGITS,
    JSONError,
    RawJSON,
    canonical,
    dumps,
    loads,
    parse_object,
)


def _raw(body: str) -> dict[str, str]:
    return {name: member.raw for name, member in parse_object(body.encode()).items()}


def _same(a: str, b: str) -> bool:
    return canonical(loads(a)) == canonical(loads(b))


# --- parse_object keeps each member's text exactly (RV3, I8) ----------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "0.10",
        "1E+2",
        "1e-7",
        "-0",
        "-0.0",
        "9007199254740993",
        "123456789012345678901234567890.000000000000000000001",
        '"tab\\tnewline\\n quote\\" slash\\/ \\u00e9 \\ud83d\\ude00"',
        '"caf\u00e9 \U0001f600"',
        '{"b" : 1 ,\n\t"a":[ 1 ,2 , {"x" :null} ] }',
        "[ ]",
        "{ }",
        "true",
        "false",
        "null",
    ],
)
def test_parse_object_keeps_member_text_exactly_RV3(raw: str) -> None:
    members = _raw('{"result":' + raw + "}")
    assert members == {"result": raw}


def test_parse_object_raw_excludes_surrounding_whitespace_only_RV3() -> None:
    members = _raw(' \n{ "a" :\t 0.10 \r\n, "b":\n[1,  2]\n}\n ')
    assert members == {"a": "0.10", "b": "[1,  2]"}


def test_parse_object_values_never_pass_through_float_I8() -> None:
    members = parse_object(b'{"a":0.10,"b":9007199254740993,"c":1E+2,"d":-0}')
    assert members["a"].value == Decimal("0.10")
    assert str(members["a"].value) == "0.10"
    assert members["b"].value == 9007199254740993
    assert isinstance(members["b"].value, int)
    assert members["c"].value == Decimal("1E+2")
    assert members["d"].value == 0 and members["d"].raw == "-0"
    assert not any(isinstance(m.value, float) for m in members.values())


def test_parse_object_of_empty_object_is_empty_C6() -> None:
    assert parse_object(b"  {  }  ") == {}


# --- what parse_object refuses (C6) -----------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        b'{"a":1,"a":1}',
        b'{"a":1,"b":2,"a":2}',
        b'{"a":{"b":1,"b":1}}',
        b'{"a":[{"b":{"c":1,"c":2}}]}',
        b'{"a":[[[{"x":[{"y":1,"y":1}]}]]]}',
        b'{"\\u0061":1,"a":2}',  # the same name, spelled with an escape
    ],
)
def test_duplicate_members_refused_at_every_depth_C6(body: bytes) -> None:
    with pytest.raises(JSONError, match="duplicate"):
        parse_object(body)


def test_names_differing_only_in_case_are_not_duplicates_C6() -> None:
    assert set(parse_object(b'{"reason":1,"Reason":2}')) == {"reason", "Reason"}


@pytest.mark.parametrize("constant", ["NaN", "Infinity", "-Infinity", "-NaN", "inf", "nan"])
def test_non_json_constants_refused_C6(constant: str) -> None:
    with pytest.raises(JSONError):
        parse_object(('{"a":' + constant + "}").encode())
    with pytest.raises(JSONError):
        parse_object(('{"a":[1,{"b":' + constant + "}]}").encode())


@pytest.mark.parametrize(
    "body",
    [
        b'{"a":"\\ud800"}',
        b'{"a":"\\udfff"}',
        b'{"a":"x\\ud83d"}',  # a high surrogate without its low half
        b'{"a":"\\ude00\\ud83d"}',  # the halves in the wrong order
        b'{"\\ud800":1}',
        b'{"a":{"\\ud800":1}}',
        b'{"a":[["\\udc00"]]}',
    ],
)
def test_lone_surrogates_refused_C6(body: bytes) -> None:
    with pytest.raises(JSONError, match="surrogate"):
        parse_object(body)


def test_surrogate_pair_escape_is_accepted_C6() -> None:
    members = parse_object(b'{"a":"\\ud83d\\ude00"}')
    assert members["a"].value == "\U0001f600"
    assert members["a"].raw == '"\\ud83d\\ude00"'


@pytest.mark.parametrize(
    "body",
    [
        b'{"a":"\xff"}',
        b'{"a":"\xc3"}',  # a truncated two-byte sequence
        b'{"a":"\xed\xa0\x80"}',  # a surrogate encoded as UTF-8 (CESU)
        b'{"a":"\xc0\xaf"}',  # an overlong encoding of "/"
        b'{"a":1}\xff',
        '{"a":"é"}'.encode("latin-1"),
        '{"a":1}'.encode("utf-16"),
    ],
)
def test_invalid_utf8_refused_C6(body: bytes) -> None:
    with pytest.raises(JSONError):
        parse_object(body)


def test_byte_order_mark_refused_C6() -> None:
    with pytest.raises(JSONError, match="byte-order mark"):
        parse_object(b'\xef\xbb\xbf{"a":1}')


@pytest.mark.parametrize(
    "body",
    [b'{"a":1} x', b'{"a":1}{"b":2}', b'{"a":1}}', b'{"a":1},', b'{"a":1}\x00', b"{}[]"],
)
def test_trailing_data_refused_C6(body: bytes) -> None:
    with pytest.raises(JSONError, match="after"):
        parse_object(body)


@pytest.mark.parametrize(
    "body",
    [b"", b"   ", b"[]", b'"a"', b"1", b"null", b"true", b'[{"a":1}]'],
)
def test_non_object_top_level_refused_C6(body: bytes) -> None:
    with pytest.raises(JSONError, match="object"):
        parse_object(body)


@pytest.mark.parametrize(
    "body",
    [
        b'{"a":}',
        b'{"a"}',
        b'{"a":1,}',
        b'{,"a":1}',
        b"{'a':1}",
        b"{a:1}",
        b'{"a":01}',
        b'{"a":+1}',
        b'{"a":1.}',
        b'{"a":.5}',
        b'{"a":1e}',
        b'{"a":0x10}',
        b'{"a":"x\ny"}',  # a raw control character inside a string
        b'{"a\ty":1}',
        b'{"a":"\\x41"}',
        b'{"a":"\\u12"}',
        b'{"\\u12":1}',
        b'{"a":[1,2}',
        b'{"a":1',
        b'{"a":',
        b'{"a"',
        b"{",
        b'{"a":1\xc2\xa0}',  # a no-break space is not JSON whitespace
        b'{"a":1 // comment\n}',
        b'{"a":undefined}',
        b'{"a":True}',
    ],
)
def test_malformed_json_refused_C6(body: bytes) -> None:
    with pytest.raises(JSONError):
        parse_object(body)


@pytest.mark.parametrize("depth", [MAX_DEPTH + 1, 1_000, 5_000, 100_000, 1_000_000])
def test_deep_nesting_refused_without_crashing_C6(depth: int) -> None:
    """Nothing but JSONError escapes, whatever the depth: no RecursionError, no MemoryError."""
    for inner in ("[" * depth + "]" * depth, '{"a":' * depth + "1" + "}" * depth):
        with pytest.raises(JSONError, match="nested"):
            parse_object(('{"result":' + inner + "}").encode())
        with pytest.raises(JSONError, match="nested"):
            loads(inner)


def test_deep_nesting_refused_even_when_unbalanced_C6() -> None:
    with pytest.raises(JSONError):
        parse_object(b'{"a":' + b"[" * 200_000 + b"}")


def test_nesting_up_to_the_limit_parses_and_canonicalises_C6() -> None:
    """What the parser accepts, ``canonical`` and ``dumps`` can always handle (no RecursionError),
    also for the idempotency digest of a whole body (O4)."""
    objects = MAX_DEPTH - 2  # + the top-level object + the innermost array = MAX_DEPTH levels
    inner = '{"a":' * objects + "[]" + "}" * objects
    body = '{"result":' + inner + "}"
    members = parse_object(body.encode())
    value = {name: member.value for name, member in members.items()}
    assert canonical(value).startswith('{"result":{"a":{"a":')
    assert json.loads(dumps(value)) == json.loads(body)
    with pytest.raises(JSONError, match="nested"):
        parse_object(('{"result":[' + inner + "]}").encode())


def test_loads_accepts_exactly_max_depth_levels_C6() -> None:
    value = loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    assert canonical(value) == dumps(value) == "[" * MAX_DEPTH + "]" * MAX_DEPTH
    with pytest.raises(JSONError, match="nested"):
        loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))


def test_integer_longer_than_python_converts_is_kept_exactly_RV3() -> None:
    """Any JSON number is accepted: one beyond int()'s 4300-digit limit stays exact."""
    digits = "9" * 5_000
    members = parse_object(('{"a":' + digits + ',"b":[-' + digits + "]}").encode())
    assert members["a"].raw == digits
    assert dumps(members["a"].value) == digits
    assert dumps(members["b"].value) == "[-" + digits + "]"
    assert canonical(loads(digits)) != canonical(loads("9" * 4_999 + "8"))


def test_integer_of_4300_digits_is_kept_exactly_RV3() -> None:
    digits = "12345678901234567890" * 215
    assert len(digits) == 4_300
    members = parse_object(('{"a":' + digits + "}").encode())
    assert members["a"].raw == digits
    assert members["a"].value == int(digits)


@pytest.mark.parametrize(
    "number",
    [
        "1e99999999999999999999",
        "1e-99999999999999999999",
        "-1.5E+123456789012345678901234567890",
    ],
)
def test_exponent_beyond_decimal_range_refused_with_json_error_C6(number: str) -> None:
    with pytest.raises(JSONError):
        parse_object(('{"a":' + number + "}").encode())
    with pytest.raises(JSONError):
        loads("[" + number + "]")


def test_json_error_is_a_value_error_with_a_message() -> None:
    with pytest.raises(ValueError, match="duplicate member 'a'"):
        parse_object(b'{"a":1,"a":2}')


# --- loads -------------------------------------------------------------------------------------


def test_loads_reads_any_top_level_value_strictly() -> None:
    assert loads(' [1, 0.10, "x", null, true, {"a": -0}] ') == [
        1,
        Decimal("0.10"),
        "x",
        None,
        True,
        {"a": 0},
    ]
    for text in ('{"a":1,"a":2}', "NaN", '"\\ud800"', "1 2", ""):
        with pytest.raises(JSONError):
            loads(text)


# --- canonical: equal exactly for the same JSON value (O4) ------------------------------------


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ('{"a":1,"b":2}', '{"b":2,"a":1}'),
        ('{"a":1,"b":2}', ' {\n "a" : 1 ,\t"b":2 } '),
        ('{"x":{"b":[1,{"d":1,"c":2}],"a":null}}', '{"x":{"a":null,"b":[1,{"c":2,"d":1}]}}'),
        ("1", "1.0"),
        ("1", "10E-1"),
        ("1", "0.1e1"),
        ("1", "1e0"),
        ("1", "1.000000000000000000000000000000"),
        ("100", "1E+2"),
        ("100", "1e2"),
        ("0.1", "0.10"),
        ("0.1", "1e-1"),
        ("0", "-0"),
        ("0", "0.0"),
        ("0", "-0.0e5"),
        ("-12.5", "-125e-1"),
        ("9007199254740993", "9007199254740993.0"),
        ("9007199254740993", "9.007199254740993e15"),
        ('"\\u00e9"', '"\u00e9"'),
        ('"\\/"', '"/"'),
        ('"\\ud83d\\ude00"', '"\U0001f600"'),
        ('{"\\u0061":1}', '{"a":1}'),
        ("1e999999999", "10e999999998"),
        ("[]", "[ ]"),
    ],
)
def test_canonical_equal_for_same_json_value_O4(a: str, b: str) -> None:
    assert _same(a, b)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("9007199254740993", "9007199254740992"),
        ("0.1", "0.1000000000000000000000000001"),
        ("1e999999999", "1e999999998"),
        ("1e-999999999", "0"),
        ("1", "-1"),
        ("true", "1"),
        ("false", "0"),
        ("null", "0"),
        ("null", "false"),
        ('"1"', "1"),
        ('"true"', "true"),
        ('""', "null"),
        ('"a"', '"A"'),
        ('"a"', '"a "'),
        ('"e\u0301"', '"\u00e9"'),  # canonically equivalent in Unicode, not the same string
        ("[1,2]", "[2,1]"),
        ("[[1],[2]]", "[[2],[1]]"),
        ("[1]", "1"),
        ("[]", "{}"),
        ("[1,2]", "[1,2,2]"),
        ('{"a":1}', '{"a":1,"b":null}'),
        ('{"a":1}', '{"A":1}'),
        ('{"a":{"b":1}}', '{"a":{"b":"1"}}'),
        ('{"a":"b"}', '{"b":"a"}'),
        ('{"a,b":1}', '{"a":1,"b":1}'),
        ('["a,b"]', '["a","b"]'),
    ],
)
def test_canonical_differs_for_different_json_values_O4(a: str, b: str) -> None:
    assert not _same(a, b)


def test_canonical_of_huge_exponents_stays_small() -> None:
    """1e999999999 must not be expanded into a billion digits."""
    tracemalloc.start()
    try:
        texts = [canonical(loads(n)) for n in ("1e999999999", "-7.5E+999999999", "1e-999999999")]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000
    assert all(len(text) < 40 for text in texts)
    assert len(set(texts)) == 3


def test_canonical_is_ascii_and_json() -> None:
    value = loads('{"é":"\U0001f600 \u2028","b":[1.50,-0,true,null]}')
    text = canonical(value)
    assert text.isascii()
    assert json.loads(text) == {"b": [15e-1, 0, True, None], "é": "\U0001f600 \u2028"}


def test_canonical_refuses_what_the_parser_never_makes() -> None:
    with pytest.raises(TypeError):
        canonical(1.5)
    with pytest.raises(TypeError):
        canonical({"a": (1, 2)})


# --- dumps (I8) --------------------------------------------------------------------------------


def test_dumps_inserts_raw_json_verbatim_I8() -> None:
    raw = '{"n": 9007199254740993, "x" : 0.10,"e":1E+2}'
    text = dumps({"result": RawJSON(raw), "list": [RawJSON(" 0.10 ")]})
    assert text == '{"result":' + raw + ',"list":[ 0.10 ]}'


def test_dumps_keeps_numbers_exact_and_never_uses_float_I8() -> None:
    text = dumps({"a": 9007199254740993, "b": Decimal("0.10"), "c": Decimal("1E+2"), "d": -0})
    assert text == '{"a":9007199254740993,"b":0.10,"c":1E+2,"d":0}'
    with pytest.raises(TypeError):
        dumps({"a": 0.1})
    with pytest.raises(TypeError):
        dumps([float("nan")])


def test_numbers_are_written_back_as_they_were_read_I8() -> None:
    """Exact value and spelling: "1e2" is not turned into "1E+2", compact or pretty, nor by a
    round trip through pickle."""
    text = "[1e2,1E+2,-1.5e-7,0.10,-0.0,9007199254740993,1.0E400]"
    value = loads(text)
    assert dumps(value) == text
    pretty = dumps(value, indent=2)
    assert [line.strip().rstrip(",") for line in pretty.splitlines()[1:-1]] == text[1:-1].split(",")
    round_trip = pickle.loads(pickle.dumps(value))  # noqa: S301 (our own value)
    assert dumps(round_trip) == text
    assert value[0] == value[1] == 100 and value[2] == Decimal("-0.00000015")
    assert canonical(value[0]) == canonical(value[1])


def test_dumps_writes_literals_and_sequences() -> None:
    assert dumps([None, True, False, 0, "", [], {}, (1, 2)]) == '[null,true,false,0,"",[],{},[1,2]]'


def test_dumps_refuses_unknown_types() -> None:
    with pytest.raises(TypeError):
        dumps({"a": {1, 2}})
    with pytest.raises(TypeError):
        dumps(b"bytes")


@pytest.mark.parametrize(
    "text",
    [
        "</script><script>alert(1)</script>",
        'quote " and backslash \\ and slash /',
        "control \x00 \x01 \x08 \t \n \x0c \r \x1f \x7f",
        "line separators \u2028 \u2029",
        "unicode caf\u00e9 \U0001f600 \u4e2d\u6587",
        "",
    ],
)
def test_dumps_escapes_strings_so_they_read_back_unchanged(text: str) -> None:
    out = dumps({text: [text], "k": text})
    assert json.loads(out) == {text: [text], "k": text}
    assert loads(out) == {text: [text], "k": text}  # our own strict reader accepts it too
    assert not any(ord(char) < 0x20 for char in out)  # control characters always escaped


def test_dumps_escapes_quote_and_backslash() -> None:
    assert dumps('say "hi"') == '"say \\"hi\\""'
    assert dumps("a\\b") == '"a\\\\b"'
    assert dumps("\x00\n") == '"\\u0000\\n"'


def test_dumps_keeps_script_close_tag_inside_the_string() -> None:
    out = dumps({"a": "</script>"})
    assert json.loads(out) == {"a": "</script>"}
    assert out.startswith('{"a":"') and out.endswith('"}')


def test_dumps_output_of_parsed_body_reparses_to_same_value() -> None:
    body = '{"a":[1,0.10,"\\u0000\\n",{"b":null}],"c":9007199254740993,"d":-1.5e-7}'
    members = parse_object(body.encode())
    value = {name: member.value for name, member in members.items()}
    assert canonical(loads(dumps(value))) == canonical(value)


def test_integers_beyond_max_int_digits_are_read_as_decimals_in_linear_time_I8() -> None:
    """``int()`` of a digit string is quadratic in its length: integers longer than
    ``MAX_INT_DIGITS`` are kept exactly as ``Decimal`` (issue 29), and still compare and
    render exactly."""
    short = "9" * MAX_INT_DIGITS
    long = "9" * (MAX_INT_DIGITS + 1)
    assert type(loads(short)) is int
    value = loads(long)
    assert type(value) is Decimal and value == int(long)
    assert dumps(value) == long
    assert dumps(loads("-" + long)) == "-" + long


@given(
    st.decimals(allow_nan=False, allow_infinity=False)
    | st.integers()
    | st.builds(lambda d, e: Decimal(f"{d}E{e}"), st.integers(), st.integers(-(10**6), 10**6))
)
def test_canonical_numbers_are_the_exact_value_O4(value: Decimal | int) -> None:
    """``canonical`` reads a number from the decimal module's scientific text (issue 29: at
    C speed): one text for every spelling of a value, the value's significant digits and the
    exponent of the last, as reading the digits one by one gives."""
    number = Decimal(str(value))
    spellings = [str(number), format(number, "E")]
    if abs(number.adjusted()) < 5000:  # written out in full: at most a few thousand digits
        spellings.append(format(number, "f"))
    assert {canonical(loads(text)) for text in spellings} == {_digit_by_digit(number)}


def _digit_by_digit(number: Decimal) -> str:
    sign, digits, exponent = number.as_tuple()
    significant = "".join(map(str, digits)).lstrip("0")
    if not significant:
        return "0"
    stripped = significant.rstrip("0")
    last = int(exponent) + len(significant) - len(stripped)
    return f"{'-' if sign else ''}{stripped}e{last}"
