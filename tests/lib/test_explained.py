"""Errors that explain themselves (lib/explained.py, issue 15): the recovery API answers in
English, the console's pages in the reader's language, from one message."""

from django.utils import translation

from orbit_console.lib import strictjson
from orbit_console.lib.recovery_rules import RuleError, check_evidence_ref, check_reason


def error_of(check, value):  # type: ignore[no-untyped-def]
    try:
        check(value)
    except (RuleError, strictjson.JSONError) as exc:
        return exc
    raise AssertionError(f"{value!r} was accepted")


def test_a_rules_message_is_english_for_the_api_and_translated_for_pages_C10() -> None:
    blank = error_of(check_reason, "   ")
    too_long = error_of(check_evidence_ref, "x" * 513)
    assert (str(blank), str(too_long)) == ("must not be blank", "must be 1 to 512 characters")
    with translation.override("zh-hans"):
        assert blank.translated() == "不能为空白"
        assert too_long.translated() == "必须为 1 到 512 个字符"
        assert str(blank) == "must not be blank"  # the API's words do not follow the reader
    with translation.override("en"):
        assert too_long.translated() == "must be 1 to 512 characters"


def test_json_errors_translate_the_decoders_words_but_never_a_members_name() -> None:
    malformed = error_of(strictjson.loads, '{"a": 1 "b": 2}')
    assert str(malformed) == "malformed JSON: Expecting ',' delimiter at character 8"
    missing = error_of(strictjson.loads, '{"confirmed": tru')
    assert str(missing) == "expected a JSON value at character 14"  # where, not 0
    duplicate = error_of(strictjson.loads, '{"Task": 1, "Task": 2}')
    assert str(duplicate) == "duplicate member 'Task'"
    with translation.override("zh-hans"):
        assert malformed.translated() == (
            "JSON 格式错误\uff1a此处应有逗号分隔符 ','\uff0c位于第 8 个字符"
        )
        assert missing.translated() == "第 14 个字符处应有一个 JSON 值"
        assert duplicate.translated() == "成员 'Task' 重复"  # "Task" is a name, not a word
