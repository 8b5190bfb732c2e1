"""Rendering entries for live pushes, in the viewer's language and time zone, once per process
for every viewer who shares them."""

from collections import OrderedDict
from zoneinfo import ZoneInfo

from django.template.loader import render_to_string
from django.utils import timezone, translation

from orbit_console.timeline.entries import Entry

_CACHE_SIZE = 512
_rendered: OrderedDict[tuple[str, str, str], str] = OrderedDict()


def render_push(entry: Entry, *, language: str, zone: ZoneInfo) -> str:
    """The entry as an htmx out-of-band swap that prepends it to the page's timeline."""
    key = (entry.key, language, zone.key)
    html = _rendered.get(key)
    if html is None:
        with translation.override(language), timezone.override(zone):
            html = render_to_string("timeline/partials/push.html", {"entry": entry})
        _rendered[key] = html
        if len(_rendered) > _CACHE_SIZE:
            _rendered.popitem(last=False)
    return html
