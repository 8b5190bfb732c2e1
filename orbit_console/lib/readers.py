"""Who reads a page or a socket: their language and time zone, from their cookies and headers
(the console's middleware for pages; every live socket that renders for its reader)."""

from http.cookies import SimpleCookie
from typing import Any
from urllib.parse import unquote
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from django.conf import settings
from django.utils import translation
from django.utils.translation.trans_real import parse_accept_lang_header

TIMEZONE_COOKIE = "orbit_tz"


def zone_named(name: str) -> ZoneInfo:
    name = unquote(name)  # the page stores it URL-encoded ("Asia%2FShanghai")
    if name and len(name) < 64:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return ZoneInfo("UTC")


def _cookies_of(scope: dict[str, Any]) -> dict[str, str]:
    for name, value in scope.get("headers", []):
        if name == b"cookie":
            cookie = SimpleCookie()
            cookie.load(value.decode("latin-1"))
            return {key: morsel.value for key, morsel in cookie.items()}
    return {}


def _language_of(scope: dict[str, Any], cookies: dict[str, str]) -> str:
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


def reader_of(scope: dict[str, Any]) -> tuple[str, ZoneInfo]:
    """The language and time zone of the person behind a socket, from its cookies and headers."""
    cookies = _cookies_of(scope)
    return _language_of(scope, cookies), zone_named(cookies.get(TIMEZONE_COOKIE, ""))
