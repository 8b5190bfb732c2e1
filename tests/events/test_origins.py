"""Which Origins the event stream's handshake accepts (``events/origins.py``; the handshake over
a real socket: ``test_stream.py``). An origin is a scheme, a host and a port, and all three must
match (issue 29: any port of an allowed host was accepted)."""

import os
import subprocess
import sys
from typing import Any

import pytest
from django.conf import settings as django_settings

from orbit_console.events.origins import allowed, origin_of


def scope(origin: str, *, host: str = "console.example.com", scheme: str = "ws") -> dict[str, Any]:
    return {
        "type": "websocket",
        "scheme": scheme,
        "headers": [(b"host", host.encode()), (b"origin", origin.encode())],
    }


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("http://console.example.com", ("http", "console.example.com", 80)),
        ("https://Console.Example.com", ("https", "console.example.com", 443)),
        ("https://console.example.com:443", ("https", "console.example.com", 443)),
        ("http://10.0.0.5:8080", ("http", "10.0.0.5", 8080)),
        ("http://[::1]:8000", ("http", "::1", 8000)),
        ("null", None),
        ("", None),
        ("ftp://console.example.com", None),
        ("https://console.example.com/", None),
        ("https://user@console.example.com", None),
        ("https://console.example.com:99999", None),
        ("console.example.com", None),
    ],
)
def test_an_origin_is_scheme_host_and_port(text: str, expected: Any) -> None:
    assert origin_of(text) == expected


def test_by_default_only_the_handshakes_own_origin_is_accepted(settings: Any) -> None:
    settings.ORBIT_EVENTS_ALLOWED_ORIGINS = []
    settings.ALLOWED_HOSTS = ["console.example.com", ".example.org"]
    assert allowed(scope("http://console.example.com"))
    assert allowed(scope("http://console.example.com:8000", host="console.example.com:8000"))
    # Behind the reverse proxy, which reports TLS (uvicorn: wss; daphne: https).
    assert allowed(scope("https://console.example.com", scheme="wss"))
    assert allowed(scope("https://console.example.com", scheme="https"))
    assert allowed(scope("https://a.example.org", host="a.example.org", scheme="wss"))
    for refused in (
        "http://console.example.com:8001",  # another port of the same host
        "https://console.example.com",  # another scheme
        "http://evil.example",
        "null",
    ):
        assert not allowed(scope(refused)), refused
    # A Host the deployment does not serve is no origin of its own (DNS rebinding).
    assert not allowed(scope("http://evil.example", host="evil.example"))


def test_configured_origins_are_matched_exactly(settings: Any) -> None:
    """The origins external consoles declare; the handshake's own origin stays accepted."""
    settings.ALLOWED_HOSTS = ["orbit.internal"]
    settings.ORBIT_EVENTS_ALLOWED_ORIGINS = ["https://console.example.com", "http://10.0.0.5:8080"]
    assert allowed(scope("https://console.example.com:443", host="orbit.internal"))
    assert allowed(scope("http://10.0.0.5:8080", host="orbit.internal"))
    assert allowed(scope("http://orbit.internal", host="orbit.internal"))
    for refused in (
        "https://console.example.com:8443",
        "http://console.example.com",
        "http://10.0.0.5:8081",
        "http://orbit.internal:8080",
    ):
        assert not allowed(scope(refused, host="orbit.internal")), refused


@pytest.mark.parametrize("value", ["console.example.com", "*", "https://console.example.com/app"])
def test_a_configured_origin_without_scheme_or_with_a_path_stops_the_start(value: str) -> None:
    """A host name alone would mean "any port, any scheme": refused at start-up."""
    result = subprocess.run(
        [sys.executable, "-c", "import django; django.setup()"],
        env={**os.environ, "ORBIT_EVENTS_ALLOWED_ORIGINS": value},
        cwd=django_settings.BASE_DIR,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode != 0
    assert "ORBIT_EVENTS_ALLOWED_ORIGINS takes origins" in result.stderr
