"""Rendering entries for live pushes, in the viewer's language and time zone, once per process
for every viewer who shares them."""

from collections import OrderedDict
from http.cookies import SimpleCookie
from typing import Any
from zoneinfo import ZoneInfo

from django.conf import settings
from django.template.loader import render_to_string
from django.utils import timezone, translation
from django.utils.translation.trans_real import parse_accept_lang_header

from orbit_console.console.middleware import TIMEZONE_COOKIE, zone_named
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


def cookies_of(scope: dict[str, Any]) -> dict[str, str]:
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            cookie = SimpleCookie()
            cookie.load(value.decode("latin-1"))
            return {key: morsel.value for key, morsel in cookie.items()}
    return {}


def language_of(scope: dict[str, Any], cookies: dict[str, str]) -> str:
    """The language the person's pages are in: their choice (cookie), else their browser's."""
    supported = {code for code, _name in settings.LANGUAGES}
    chosen = cookies.get(settings.LANGUAGE_COOKIE_NAME, "")
    candidates = [chosen] if chosen else []
    for name, value in scope.get("headers", []):
        if name == b"accept-language":
            candidates += [lang for lang, _q in parse_accept_lang_header(value.decode("latin-1"))]
    for candidate in candidates:
        try:
            variant = translation.get_supported_language_variant(candidate)
        except LookupError:
            continue
        if variant in supported:
            return variant
    return settings.LANGUAGE_CODE


def zone_of_scope(cookies: dict[str, str]) -> ZoneInfo:
    return zone_named(cookies.get(TIMEZONE_COOKIE, ""))
