"""The translation catalogue (issue 15): every message of the console has a reviewed 简体中文
translation. ``makemessages`` marks a new message untranslated, and a changed one "fuzzy" with
a guess taken from a neighbour: either would show English, or a wrong sentence, on a page in
zh-Hans. Run after ``manage.py makemessages -l zh_Hans`` (docs/console.md, "Languages")."""

import ast
import gettext
import re
from pathlib import Path

from django.conf import settings

CATALOGUE = Path(settings.BASE_DIR) / "orbit_console" / "locale" / "zh_Hans" / "LC_MESSAGES"
STRING = r'"(?:[^"\\]|\\.)*"'
ENTRY = re.compile(
    rf"(?P<flags>(?:#[^\n]*\n)*)msgid (?P<msgid>{STRING}(?:\n{STRING})*)\n"
    rf"(?:msgid_plural {STRING}(?:\n{STRING})*\n)?"
    rf"(?P<msgstrs>(?:msgstr(?:\[\d\])? {STRING}(?:\n{STRING})*\n?)+)"
)


def joined(strings: str) -> str:
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', strings))


def test_every_message_is_translated_and_none_is_fuzzy() -> None:
    entries = list(ENTRY.finditer((CATALOGUE / "django.po").read_text()))
    assert len(entries) > 300  # the parser read the catalogue
    untranslated, fuzzy = [], []
    for entry in entries:
        msgid = joined(entry["msgid"])
        if not msgid:
            continue  # the header
        translations = re.findall(rf"msgstr(?:\[\d\])? ({STRING}(?:\n{STRING})*)", entry["msgstrs"])
        if any(not joined(text) for text in translations):
            untranslated.append(msgid)
        if re.search(r"^#,.*\bfuzzy\b", entry["flags"], re.MULTILINE):
            fuzzy.append(msgid)
    assert untranslated == [], untranslated
    assert fuzzy == [], fuzzy


def test_the_compiled_catalogue_is_the_catalogue() -> None:
    """django.mo, what Django reads, says what django.po says: it was compiled after the last
    change (``manage.py compilemessages -l zh_Hans``)."""
    with (CATALOGUE / "django.mo").open("rb") as compiled:
        catalog = gettext.GNUTranslations(compiled)._catalog  # type: ignore[attr-defined]
    expected = {}
    for entry in ENTRY.finditer((CATALOGUE / "django.po").read_text()):
        msgid = unescape(joined(entry["msgid"]))
        if not msgid or re.search(r"^#,.*\bfuzzy\b", entry["flags"], re.MULTILINE):
            continue
        parts = re.findall(rf"msgstr(?:\[(\d)\])? ({STRING}(?:\n{STRING})*)", entry["msgstrs"])
        for index, text in parts:
            key = (msgid, int(index)) if index else msgid
            expected[key] = unescape(joined(text))
    found = {key: value for key, value in catalog.items() if key != ""}
    assert found == expected


def unescape(text: str) -> str:
    return str(ast.literal_eval(f'"{text}"'))


BLOCKS = re.compile(r"{%\s*(blocktranslate|blocktrans|comment)\b.*?%}.*?{%\s*end\1\s*%}", re.S)
SPOKEN_ATTRIBUTES = re.compile(r'\b(aria-label|title|placeholder|alt)="([^"]*)"')


def untranslated_text(template: str) -> list[str]:
    """Words of a template that a reader sees but no translation covers: text outside
    ``{% translate %}`` and ``{% blocktranslate %}``, and the spoken attributes (labels, titles,
    placeholders). Template variables and tags count as no text."""
    text = BLOCKS.sub(" ", template)
    text = re.sub(r"{#.*?#}", " ", text, flags=re.S)
    text = re.sub(r"{%.*?%}|{{.*?}}", "\x00", text, flags=re.S)
    text = re.sub(r"<script.*?</script>|<style.*?</style>|<!--.*?-->", " ", text, flags=re.S)
    found = [
        f"{name}={value}"
        for name, value in SPOKEN_ATTRIBUTES.findall(text)
        if re.search(r"[A-Za-z]{2}", value)
    ]
    visible = re.sub(r"<[^>]*>", " ", text)
    return found + re.findall(r"[A-Za-z][A-Za-z'\u2019-]+", visible)


def test_no_template_shows_a_word_outside_a_translation() -> None:
    """Issue 15: English left on a page rendered in zh-Hans. Every word a template shows goes
    through the catalogue; the checker itself finds what it must."""
    assert untranslated_text('<p title="Close">Hello {{ name }}</p>') == ["title=Close", "Hello"]
    assert untranslated_text('<p>{% translate "Hello" %} {{ name }}</p>') == []
    roots = [Path(settings.BASE_DIR) / "templates"]
    roots += list((Path(settings.BASE_DIR) / "orbit_console").glob("*/templates"))
    found = {
        str(path.relative_to(settings.BASE_DIR)): words
        for root in roots
        for path in sorted(root.rglob("*.html"))
        if (words := untranslated_text(path.read_text()))
    }
    assert found == {}
