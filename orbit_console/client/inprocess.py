"""The embedded recovery API of this very process, reached without the network.

When the console runs on the embedded API (no ``ORBIT_API_URL``, no ``ORBIT_EMBEDDED_API_URL``),
its client sends each request through the API's own handler in the same process
(``ops/handler.ApiHandler``) instead of out through TCP and back in through the server. The
boundary is the same: the request is a real HTTP request to ``/v1/...`` with the person's
bearer token, through the same URL configuration, middleware, authentication, permission
checks, audit and error envelope as a request from outside; only the socket and the second
trip through the server are gone (docs/architecture.md). It is marked in-process, as a part of
the console request that made it (its database connection's care is that request's).

Each request runs as a task of its own, so the API's middleware (its request id) never leaks
into the console request that made the call, and the API answers in English and UTC whatever
the console page's language and zone; the client's read timeout bounds it as it bounds a
request over the network.
"""

import asyncio
from collections.abc import MutableMapping
from typing import Any
from urllib.parse import urlsplit

import httpx
from django.conf import settings
from django.utils.module_loading import import_string

from orbit_console.client.events import SUBPROTOCOL, InProcessSocket
from orbit_console.ops.handler import IN_PROCESS, get_api_application

CLIENT_ADDRESS = ("127.0.0.1", 0)


async def _isolated(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    scope[IN_PROCESS] = True
    await asyncio.create_task(get_api_application()(scope, receive, send))  # type: ignore[arg-type]


class InProcessTransport(httpx.AsyncBaseTransport):
    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._asgi = httpx.ASGITransport(
            app=_isolated, raise_app_exceptions=False, client=CLIENT_ADDRESS
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            async with asyncio.timeout(self.timeout):
                return await self._asgi.handle_async_request(request)
        except TimeoutError as exc:
            raise httpx.ReadTimeout("the embedded API did not answer in time") from exc


def base_url() -> str:
    """A host this deployment answers to: the API checks the Host header like any request."""
    host = next((h.lstrip(".") for h in settings.ALLOWED_HOSTS if h != "*"), "localhost")
    return f"http://{host}"


async def open_socket(request: dict[str, Any]) -> InProcessSocket:
    """A WebSocket to this process's ASGI application (``ASGI_APPLICATION``: the event stream
    of the embedded API), for ``client/events.open_stream``: the handshake carries the path,
    query, headers and Origin a network client would send."""
    application = import_string(settings.ASGI_APPLICATION)
    host = urlsplit(base_url()).netloc
    headers = [(b"host", host.encode())]
    headers += [
        (name.lower().encode(), value.encode()) for name, value in request["headers"].items()
    ]
    headers += [
        (b"origin", request["origin"].encode()),
        (b"sec-websocket-protocol", SUBPROTOCOL.encode()),
    ]
    scope = {
        "type": "websocket",
        "asgi": {"version": "3.0"},
        "scheme": "ws",
        "path": request["path"],
        "raw_path": request["path"].encode(),
        "root_path": "",
        "query_string": request["query"].encode(),
        "headers": headers,
        "client": CLIENT_ADDRESS,
        "server": (host, 80),
        "subprotocols": [SUBPROTOCOL],
        "extensions": {"websocket.http.response": {}},
        IN_PROCESS: True,
    }
    return await InProcessSocket(application, scope).open()
