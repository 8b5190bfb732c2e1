"""Notes the system writes into the console's append-only record, stored language-neutral and
shown in the reader's language (issue 15: "approved by supervisor" and "由 supervisor 批准"
stood side by side in one list, each in the language of whoever happened to act).

A system note is stored as its English text (``written``), from a template of ``SYSTEM_NOTES``;
``shown`` gives it back in the active language by recognising the template. Notes people write
(a rejection's reason, an approval's note) match no template and are shown as they were
written. Rows written before this change stay as they were written: the record is immutable.
"""

import re
from functools import cache

from django.utils.translation import gettext, gettext_noop

APPROVED_BY = gettext_noop("approved by %(name)s")
SENT_AGAIN_BY_RECONCILER = gettext_noop("sent again by the reconciler")
RECONCILER_STOPPED = gettext_noop("the reconciler's deadline passed; a person must resend or check")
FOLLOWED_TO_ITS_END = gettext_noop("task %(task)s is %(state)s at revision %(revision)s")
SYSTEM_NOTES = (APPROVED_BY, SENT_AGAIN_BY_RECONCILER, RECONCILER_STOPPED, FOLLOWED_TO_ITS_END)


def written(template: str, **params: str) -> str:
    """The note to store: the English text of ``template`` (one of ``SYSTEM_NOTES``)."""
    if template not in SYSTEM_NOTES:
        raise ValueError(f"not a system note: {template!r}")
    return template % params if params else template


@cache
def _pattern(template: str) -> re.Pattern[str]:
    parts = re.split(r"%\((\w+)\)s", template)
    regex = "".join(
        f"(?P<{part}>.+)" if index % 2 else re.escape(part) for index, part in enumerate(parts)
    )
    return re.compile(regex, re.DOTALL)


def shown(note: str) -> str:
    """``note`` in the active language if the system wrote it, else as it was written."""
    for template in SYSTEM_NOTES:
        if match := _pattern(template).fullmatch(note):
            text = gettext(template)
            return text % match.groupdict() if match.groupdict() else text
    return note
