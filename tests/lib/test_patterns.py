"""orbit_console.lib.patterns: the patterns administrators and people supply are matched by
RE2, in time linear in the text (issue 41: ``(a+)+`` on 26 characters took 6.3 s in Python's
``re``, doubling per character). What RE2 cannot match so is refused, the construct named."""

import pytest

from orbit_console.lib.patterns import PatternRefused, linear


def test_a_catastrophic_pattern_finishes_on_a_long_hostile_text() -> None:
    """Backtracking would take 2^100000 steps; RE2 reads the text once. No timing: it ends."""
    hostile = "a" * 100_000 + "!"
    assert linear("(a+)+").fullmatch(hostile) is None
    assert linear("(a|aa)+$").search(hostile) is None
    assert linear("(a+)+").fullmatch("aaaa") is not None


@pytest.mark.parametrize(
    ("pattern", "named"),
    [
        (r"(INC)-\1", r"a backreference \1"),
        (r"(?P<p>INC)-(?P=p)", "a named backreference (?P=name)"),
        (r"(?=INC)\w+", "a lookahead (?=...)"),
        (r"(?!TMP)\w+", "a negative lookahead (?!...)"),
        (r"\w+(?<=1)", "a lookbehind (?<=...)"),
        (r"\w+(?<!0)", "a negative lookbehind (?<!...)"),
        (r"(?>a+)b", "an atomic group (?>...)"),
        (r"a++b", "a possessive quantifier ++"),
        (r"INC-\d+\Z", r"\Z (write the end of the text as \z)"),
        (r"a{5000}", "a repetition over 1000 {5000}"),
        (r"\C+", r"\C (any byte)"),
    ],
)
def test_what_re2_cannot_express_is_refused_by_name(pattern: str, named: str) -> None:
    with pytest.raises(PatternRefused) as refused:
        linear(pattern)
    assert named in str(refused.value)
    assert "github.com/google/re2/wiki/Syntax" in str(refused.value)


def test_a_broken_pattern_is_refused_quietly(capfd: pytest.CaptureFixture[str]) -> None:
    """RE2 logs its parse errors to stderr unless told not to: the person is told, not the log."""
    with pytest.raises(PatternRefused, match="not a regular expression: missing \\)"):
        linear("INC-(")
    assert capfd.readouterr().err == ""


def test_an_escaped_backslash_before_c_is_no_byte_class() -> None:
    assert linear(r"\\C").fullmatch("\\C") is not None
