"""Template helpers of the console: times, exact JSON, ids."""

from datetime import datetime, timedelta
from typing import Any

from django import template
from django.conf import settings
from django.utils import timezone
from django.utils.formats import date_format, number_format
from django.utils.html import format_html
from django.utils.timesince import timesince, timeuntil
from django.utils.translation import gettext as _

from orbit_console.console import explorer
from orbit_console.console.waiting import waiting_count
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


@register.simple_tag
def ago(value: datetime | None) -> str:
    """A time relative to now ("3 minutes ago", "in 5 hours"), the exact local and UTC times on
    hover. static/js/console.js rewrites the text in the page's language and keeps it current
    (every 30 s); this server text is what a page without script shows."""
    if value is None:
        return format_html('<span class="muted">{}</span>', "—")
    utc = format_utc(value)
    exact_utc = utc.replace("T", " ").replace("Z", " UTC")
    local = date_format(timezone.localtime(value), "Y-m-d H:i:s T")
    now = timezone.now()
    if value <= now:
        text = _("%(time)s ago") % {"time": timesince(value, now, depth=1)}
    else:
        text = _("in %(time)s") % {"time": timeuntil(value, now, depth=1)}
    return format_html(
        '<time datetime="{}" title="{}" data-relative>{}</time>',
        utc,
        local if local.endswith("UTC") else f"{local} ({exact_utc})",
        text,
    )


@register.simple_tag
def copy_button(value: str, kind: str = "") -> str:
    """A button that copies ``value`` (an id) to the clipboard and says "Copied" where it was
    pressed (static/js/console.js). Its accessible name says what it copies: the visible
    "Copy" first (WCAG's label in name), then which id."""
    labels = {
        "task": _("Copy task id %(value)s"),
        "submission": _("Copy submission id %(value)s"),
        "proposal": _("Copy proposal id %(value)s"),
        "operation": _("Copy audit id %(value)s"),
        "batch": _("Copy batch id %(value)s"),
    }
    name = labels.get(kind, _("Copy %(value)s")) % {"value": value}
    return format_html(
        '<button type="button" class="copy" data-copy-text="{}" data-copied="{}" aria-label="{}"'
        ' title="{}">{}</button>',
        value,
        _("Copied"),
        name,
        name,
        _("Copy"),
    )


@register.simple_tag(takes_context=True)
def namespace(context: template.Context, namespace_id: str) -> str:
    """A namespace by its name, the id beside it: the deployment's name for it
    (``CONSOLE_NAMESPACE_NAMES``), else the one the API gave the person's credential in it."""
    name = settings.CONSOLE_NAMESPACE_NAMES.get(namespace_id, "")
    person = getattr(context.get("request"), "person", None)
    if not name and person is not None:
        credential = person.credential_in(namespace_id)
        name = credential.namespace_name if credential is not None else ""
    if not name:
        return format_html('<span class="mono">{}</span>', namespace_id)
    return format_html('{} <span class="mono muted">{}</span>', name, namespace_id)


@register.filter
def grouped(value: int) -> str:
    """A count with the language's digit grouping: 1,234."""
    return number_format(value, force_grouping=True)


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
def readable_note(note: str) -> str:
    """A note of the console's record for people: an export's JSON note as words
    (``explorer.readable_note``), any other as ``shown_note``."""
    return explorer.readable_note(note)


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
    waits for approval), ``retried`` (the successor's id and state) and ``more`` (other apps'
    marks, each with its template), for ``{% ... as %}``."""
    if marks is None:
        return {}
    return {
        "pending": task_id in marks.pending,
        "retried": marks.retried.get(task_id),
        "more": marks.more.get(task_id, []),
    }


@register.inclusion_tag("console/partials/nav_waiting.html", takes_context=True)
def nav_waiting(context: template.Context) -> dict[str, Any]:
    """What waits for the signed-in supervisor's approval, beside "Approvals" in the page
    header (issue 30): counted only where the header renders, not for every fragment."""
    return {"waiting_count": waiting_count(context.get("person"))}
