"""What is answered at the ASGI edge, before Django: static files and the liveness probe.

Static files: WhiteNoise's Django middleware is synchronous; under ASGI a sync middleware pins
every request to the single thread that also runs the embedded API's views, and a console view
waiting on the API over HTTP would wait on itself. So the files are served here, with
WhiteNoise choosing the file, the compressed variant and the caching headers.

Liveness (``GET /health/live``): "the process answers" is all it says (O7), so it is answered
by the process's event loop without Django's handler and middleware, which cost four fifths
of it (docs/performance.md). It still carries a fresh ``X-Request-Id``, like every answer.
Probes are not access-logged: an orchestrator asks every few seconds and the lines would say
nothing. ``/health/ready`` checks the database and the channel layer and stays a Django view.
"""

import asyncio
from typing import Any

from django.conf import settings
from whitenoise.middleware import WhiteNoiseMiddleware

from orbit_console.lib import live
from orbit_console.lib.ids import new_request_id
from orbit_console.ops.handler import is_api_path
from orbit_console.ops.middleware import REQUEST_ID_HEADER

CHUNK = 64 * 1024
_FORWARDED = {
    b"if-none-match": "HTTP_IF_NONE_MATCH",
    b"if-modified-since": "HTTP_IF_MODIFIED_SINCE",
    b"range": "HTTP_RANGE",
    b"accept-encoding": "HTTP_ACCEPT_ENCODING",
}


LIVENESS_PATH = "/health/live"
_LIVE_BODY = b'{"status":"live"}'
_LIVE_HEADERS = [
    (b"content-type", b"application/json"),
    (b"content-length", str(len(_LIVE_BODY)).encode()),
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
]


class Edge:
    """Static files and liveness here; the recovery API to its own handler (``api``); the rest
    to Django's (``application``). The process's live notifications go out from this loop."""

    def __init__(self, application: Any, api: Any) -> None:
        self.application = application
        self.api = api
        self.index = WhiteNoiseMiddleware(get_response=None)
        self.prefix = settings.STATIC_URL

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        live.serve_from_running_loop()
        if scope["type"] == "http" and is_api_path(scope["path"]):
            await self.api(scope, receive, send)
            return
        if scope["type"] == "http" and scope["path"] == LIVENESS_PATH:
            await self._live(scope, send)
            return
        if scope["type"] == "http" and scope["path"].startswith(self.prefix):
            static_file = (
                self.index.find_file(scope["path"])
                if self.index.autorefresh
                else self.index.files.get(scope["path"])
            )
            if static_file is not None:
                await self._serve(static_file, scope, send)
                return
        await self.application(scope, receive, send)

    @staticmethod
    async def _live(scope: dict[str, Any], send: Any) -> None:
        if scope["method"] not in ("GET", "HEAD"):
            status, headers, body = 405, [(b"allow", b"GET, HEAD")], b""
        else:
            status, headers = 200, _LIVE_HEADERS
            body = _LIVE_BODY if scope["method"] == "GET" else b""
        headers = [*headers, (REQUEST_ID_HEADER.lower().encode(), new_request_id().encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def _serve(self, static_file: Any, scope: dict[str, Any], send: Any) -> None:
        meta = {
            _FORWARDED[name]: value.decode("latin-1")
            for name, value in scope.get("headers", [])
            if name in _FORWARDED
        }
        response = await asyncio.to_thread(static_file.get_response, scope["method"], meta)
        headers = [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in response.headers]
        headers.append((b"x-content-type-options", b"nosniff"))
        await send(
            {"type": "http.response.start", "status": int(response.status), "headers": headers}
        )
        handle = response.file
        if handle is None:
            await send({"type": "http.response.body", "body": b""})
            return
        try:
            while chunk := await asyncio.to_thread(handle.read, CHUNK):
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            handle.close()
