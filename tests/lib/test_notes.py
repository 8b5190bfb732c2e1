"""System notes of the console's record (lib/notes.py, issue 15): stored in one language, shown
in the reader's."""

import pytest
from django.template import Context, Template
from django.utils import translation

from orbit_console.lib import notes


def test_a_system_note_is_stored_in_english_and_shown_in_the_readers_language() -> None:
    stored = notes.written(notes.APPROVED_BY, name="sup-7")
    assert stored == "approved by sup-7"
    with translation.override("zh-hans"):
        assert notes.shown(stored) == "由 sup-7 批准"
        assert notes.shown(notes.written(notes.SENT_AGAIN_BY_RECONCILER)) == "由对账程序重新发送"
        # The filter the pages use.
        rendered = Template("{% load console %}{{ note|shown_note }}").render(
            Context({"note": stored})
        )
        assert rendered == "由 sup-7 批准"
    with translation.override("en"):
        assert notes.shown(stored) == "approved by sup-7"


def test_a_persons_note_is_shown_as_they_wrote_it() -> None:
    with translation.override("zh-hans"):
        assert notes.shown("Checked with ops: the store has it") == (
            "Checked with ops: the store has it"
        )
        assert notes.shown("approved") == "approved"


def test_only_system_notes_are_written_through_it() -> None:
    with pytest.raises(ValueError, match="not a system note"):
        notes.written("whatever %(name)s", name="x")
