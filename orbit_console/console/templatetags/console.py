"""Template helpers of the console: times, exact JSON, ids."""

from datetime import datetime, timedelta
from typing import Any

from django import template
from django.utils import timezone
from django.utils.formats import date_format
from django.utils.html import format_html
from django.utils.translation import gettext as _

from orbit_console.lib import notes, strictjson
from orbit_console.lib.rfc3339 import format_utc

register = template.Library()


@register.simple_tag
def when(value: datetime | None) -> str:
    """A time in the person's local time zone, with the exact UTC time on hover."""
    if value is None:
        return format_html('<span class="muted">{}</span>', "—")
    utc = format_utc(value)
    return format_html(
        '<time datetime="{}" title="{}">{}</time>',
        utc,
        utc.replace("T", " ").replace("Z", " UTC"),
        date_format(timezone.localtime(value), "Y-m-d H:i:s T"),
    )


@register.filter
def pretty_json(value: Any) -> str:
    """An exact JSON value (ints, Decimals) pretty-printed; numbers are never rounded."""
    return strictjson.dumps(value, indent=2)


@register.filter
def short_id(value: str | None) -> str:
    return (value or "")[:8]


@register.filter
def reindent_json(text: str) -> str:
    """Stored JSON text, pretty-printed exactly."""
    try:
        return strictjson.dumps(strictjson.loads(text), indent=2)
    except strictjson.JSONError:
        return text


@register.filter
def shown_note(note: str) -> str:
    """A note of the console's record in the reader's language when the system wrote it
    (lib/notes.py); a person's note as they wrote it."""
    return notes.shown(note)


@register.filter
def seconds(value: timedelta | None) -> str:
    """A duration for people: "2 min 5 s", "40 s"."""
    if value is None:
        return ""
    total = max(0, round(value.total_seconds()))
    minutes, rest = divmod(total, 60)
    if minutes:
        return _("%(m)s min %(s)s s") % {"m": minutes, "s": rest}
    return _("%(s)s s") % {"s": rest}


@register.simple_tag
def row_marks(marks: Any, task_id: str) -> dict[str, Any]:
    """A work queue row's marks (console/waiting.py ``RowMarks``): ``pending`` (a proposal
    waits for approval) and ``retried`` (the successor's id and state), for ``{% ... as %}``."""
    if marks is None:
        return {}
    return {"pending": task_id in marks.pending, "retried": marks.retried.get(task_id)}
