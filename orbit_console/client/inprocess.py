"""The embedded recovery API of this very process, reached without the network.

When the console runs on the embedded API (no ``ORBIT_API_URL``, no ``ORBIT_EMBEDDED_API_URL``),
its client sends each request through Django's ASGI handler in the same process instead of
out through TCP and back in through the server. The boundary is the same: the request is a
real HTTP request to ``/v1/...`` with the person's bearer token, through the same URL
configuration, middleware, authentication, permission checks, audit and error envelope; only
the socket and the second trip through the server are gone (docs/architecture.md).

Each request runs as a task of its own, so the API's middleware (its language, time zone and
request id) never leaks into the console request that made the call; the client's read
timeout bounds it as it bounds a request over the network.
"""

import asyncio
import functools
from collections.abc import MutableMapping
from typing import Any

import httpx
from django.conf import settings

CLIENT_ADDRESS = ("127.0.0.1", 0)


@functools.cache
def _handler() -> Any:
    from orbit_console.ops.handler import SharedThreadASGIHandler

    return SharedThreadASGIHandler()


async def _isolated(scope: MutableMapping[str, Any], receive: Any, send: Any) -> None:
    await asyncio.create_task(_handler()(scope, receive, send))


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
