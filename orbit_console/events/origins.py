"""The Origins the event stream's handshake accepts, and the refusal of the others.

A browser names, in ``Origin``, the page that opens a WebSocket, and sends the page's cookies
and nothing else of its own: the check keeps a page of another site from driving a stream with
a token it holds. An origin is a scheme, a host and a port (RFC 6454): ``http://host:8000`` is
another origin than ``http://host:9000`` or ``https://host:8000``, so all three are compared.
Channels' ``OriginValidator``, given host names (``ALLOWED_HOSTS``), compares the host alone
and accepted a page of any port (issue 29).

Accepted: the handshake's own origin — the scheme it came over (``ws``: ``http``, ``wss``:
``https``, as the reverse proxy reports it) and the ``Host`` it was sent to, port included —
when that host is one the deployment answers to (``ALLOWED_HOSTS``: the console's in-process
feed, a page of the deployment itself); and each of ``ORBIT_EVENTS_ALLOWED_ORIGINS`` (each
``scheme://host[:port]``: the origins external consoles declare). A refusal is the API's
envelope, 403 ``PERMISSION_DENIED`` with a request id, where the server can answer a handshake
(uvicorn); daphne can only close it (403 without a body).
"""

from typing import Any
from urllib.parse import urlsplit

from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http.request import split_domain_port, validate_host

from orbit_console.events.stream import refuse_handshake
from orbit_console.ledger.errors import PermissionDenied
from orbit_console.lib.ids import new_request_id

Origin = tuple[str, str, int]  # scheme (http or https), host (lowercase), port
_SCHEMES = {"http": "http", "ws": "http", "https": "https", "wss": "https"}
_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin_of(text: str) -> Origin | None:
    """``scheme://host[:port]`` as an origin; ``None`` for anything else (``null``, a path)."""
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError:
        return None
    scheme = _SCHEMES.get(parts.scheme.lower())
    if (
        scheme is None
        or not parts.hostname
        or parts.username is not None
        or parts.password is not None
        or parts.path
        or parts.query
        or parts.fragment
    ):
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def _own_origin(scope: dict[str, Any]) -> Origin | None:
    """The origin the handshake was made to: its scheme and its ``Host`` header, when the host
    is one of ``ALLOWED_HOSTS``."""
    host = _header(scope, b"host")
    domain, _ = split_domain_port(host)
    if not domain or not validate_host(domain, settings.ALLOWED_HOSTS):
        return None
    return origin_of(f"{scope.get('scheme', 'ws')}://{host}")


def _header(scope: dict[str, Any], name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key == name:
            return str(value.decode("latin-1"))
    return ""


def allowed(scope: dict[str, Any]) -> bool:
    origin = origin_of(_header(scope, b"origin"))
    if origin is None:
        return False
    if origin == _own_origin(scope):
        return True
    return origin in {origin_of(text) for text in settings.ORBIT_EVENTS_ALLOWED_ORIGINS}


class OriginRefused(AsyncWebsocketConsumer):
    async def connect(self) -> None:
        error = PermissionDenied("the Origin of this handshake is not allowed")
        await refuse_handshake(self, error, new_request_id())


class EventOriginValidator:
    """Let a handshake with an allowed Origin through to ``application``; refuse the others
    in the API's envelope (docs/events.md)."""

    def __init__(self, application: Any) -> None:
        self.application = application
        self.refuse = OriginRefused.as_asgi()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        if allowed(scope):
            return await self.application(scope, receive, send)
        return await self.refuse(scope, receive, send)
