"""Errors that explain themselves, in English to the recovery API's clients and in the reader's
language on the console's pages (issue 15: the rules' messages stayed English in zh-Hans).

The message is an English template marked for translation (``gettext_noop``: found by
``makemessages``, translated only when asked) with ``%(name)s`` placeholders. ``str()`` gives
the English text, as the API answers it; ``translated()`` the text in the active language. A
placeholder's value is shown as it is (a member name, a position), unless it is ``Words``: a
phrase of our own or of Python's JSON decoder, translated with the template.
"""

from django.utils.translation import gettext, gettext_noop


class Words(str):
    """A placeholder value that is itself words to translate (marked with ``gettext_noop``)."""

    __slots__ = ()


class Explained(ValueError):
    def __init__(self, template: str, **params: object) -> None:
        self.template = template
        self.params = params
        super().__init__(template % params if params else template)

    def translated(self) -> str:
        params = {
            name: gettext(value) if isinstance(value, Words) else value
            for name, value in self.params.items()
        }
        text = gettext(self.template)
        return text % params if params else text


# What Python's JSON decoder says (``json.JSONDecodeError.msg``), so that it can be translated.
JSON_DECODER_MESSAGES = frozenset(
    {
        gettext_noop("Expecting value"),
        gettext_noop("Expecting ',' delimiter"),
        gettext_noop("Expecting ':' delimiter"),
        gettext_noop("Expecting property name enclosed in double quotes"),
        gettext_noop("Unterminated string starting at"),
        gettext_noop("Invalid control character at"),
        gettext_noop("Invalid \\escape"),
        gettext_noop("Invalid \\uXXXX escape"),
        gettext_noop("Illegal trailing comma before end of object"),
        gettext_noop("Illegal trailing comma before end of array"),
        gettext_noop("Extra data"),
    }
)


def decoder_words(message: str) -> str:
    """Python's JSON decoder message as ``Words`` when it is one we translate."""
    return Words(message) if message in JSON_DECODER_MESSAGES else message
