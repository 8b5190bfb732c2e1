import logging
import time
from collections.abc import Awaitable, Callable

from asgiref.sync import iscoroutinefunction, markcoroutinefunction
from django.http import HttpRequest, HttpResponse

from orbit_console.lib.ids import new_request_id
from orbit_console.ops.context import current_request_id
from orbit_console.ops.metrics import REQUEST_LATENCY

access_logger = logging.getLogger("orbit.access")

REQUEST_ID_HEADER = "X-Request-Id"


class RequestIdMiddleware:
    """Give every request a fresh 32-hex id, expose it to logs and answer it in a header.

    The id is never taken from the client: a forged id could be used to muddle the logs.
    """

    async_capable = True
    sync_capable = True

    def __init__(
        self, get_response: Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]
    ):
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest):  # type: ignore[no-untyped-def]
        if iscoroutinefunction(self):
            return self.__acall__(request)
        request_id = self._begin(request)
        token = current_request_id.set(request_id)
        try:
            response = self.get_response(request)
        finally:
            current_request_id.reset(token)
        response[REQUEST_ID_HEADER] = request_id  # type: ignore[index]
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        request_id = self._begin(request)
        token = current_request_id.set(request_id)
        try:
            response = await self.get_response(request)  # type: ignore[misc]
        finally:
            current_request_id.reset(token)
        response[REQUEST_ID_HEADER] = request_id
        return response

    @staticmethod
    def _begin(request: HttpRequest) -> str:
        request_id = new_request_id()
        request.request_id = request_id  # type: ignore[attr-defined]
        return request_id


class AccessLogMiddleware:
    """One structured log line and one latency observation per request.

    The line holds the method, the path without its query string (queries can carry business
    keys, E2), the status, the time taken and the view; ``request_id`` comes from the log filter.
    """

    async_capable = True
    sync_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponse]]) -> None:
        self.get_response = get_response
        markcoroutinefunction(self)

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = await self.get_response(request)
        elapsed = time.perf_counter() - started
        match = request.resolver_match
        view = match.view_name if match is not None and match.view_name else "unmatched"
        if view.endswith("metrics"):
            return response
        REQUEST_LATENCY.labels(
            view=view, method=request.method, status=response.status_code
        ).observe(elapsed)
        access_logger.info(
            "request",
            extra={
                "method": request.method,
                "path": request.path,
                "status": response.status_code,
                "duration_ms": round(elapsed * 1000, 1),
                "view": view,
            },
        )
        return response
