import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from asgiref.sync import iscoroutinefunction, markcoroutinefunction, sync_to_async
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.exception import response_for_exception
from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils import translation
from django.utils.deprecation import MiddlewareMixin
from django.utils.module_loading import import_string

from orbit_console.lib.ids import new_request_id
from orbit_console.ops.context import current_request_id
from orbit_console.ops.lanes import ANONYMOUS, PEOPLE, Lane, carries_pass, client_address
from orbit_console.ops.metrics import (
    ANONYMOUS_IN_FLIGHT,
    ANONYMOUS_IN_FLIGHT_LIMIT,
    ANONYMOUS_SHED,
    IN_FLIGHT,
    IN_FLIGHT_LIMIT,
    REQUEST_LATENCY,
    SHED,
)
from orbit_console.ops.views import fault_page, own_error_page

access_logger = logging.getLogger("orbit.access")
logger = logging.getLogger("orbit.ops")

# The database errors that mean "not reachable now", not "this request is wrong".
OUTAGES = (OperationalError, InterfaceError)

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
    sync_capable = True

    def __init__(
        self, get_response: Callable[[HttpRequest], HttpResponse | Awaitable[HttpResponse]]
    ) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest):  # type: ignore[no-untyped-def]
        if iscoroutinefunction(self):
            return self.__acall__(request)
        started = time.perf_counter()
        response: HttpResponse = self.get_response(request)  # type: ignore[assignment]
        self._record(request, response, time.perf_counter() - started)
        return response

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = await self.get_response(request)  # type: ignore[misc]
        self._record(request, response, time.perf_counter() - started)
        return response

    @staticmethod
    def _record(request: HttpRequest, response: HttpResponse, elapsed: float) -> None:
        match = request.resolver_match
        view = match.view_name if match is not None and match.view_name else "unmatched"
        if view.endswith("metrics"):
            return
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


def _never_called(request: HttpRequest) -> HttpResponse:
    raise AssertionError("a grouped middleware's own get_response is never used")


class SyncMiddlewareGroup:
    """Django's synchronous middleware (``settings.SYNC_MIDDLEWARE``), run in one thread hop
    each way instead of one per hook.

    Under ASGI, every ``MiddlewareMixin`` hops to the sync thread and back for its
    ``process_request`` and again for its ``process_response``: with sessions, CSRF, auth,
    messages, locale and the security headers that was eighteen hops a request, the largest
    cost of a cheap request (docs/performance.md). Here the group calls every member's
    ``process_request`` in order in one hop, awaits the rest of the chain, then calls their
    ``process_response`` in reverse in one hop, exactly as Django's own chain would:

    - a member whose ``process_request`` answers stops the request phase, and only it and
      the members before it see the response;
    - an exception in a hook becomes a response just outside that member
      (``response_for_exception``, as Django's ``convert_exception_to_response`` around each
      middleware does), and the members before it still see it;
    - ``process_view`` and ``process_exception`` hooks are offered to Django's handler as one
      hook each (Django calls view hooks in order, exception hooks in reverse).
    """

    async_capable = True
    sync_capable = False

    def __init__(self, get_response: Callable[[HttpRequest], Awaitable[HttpResponse]]) -> None:
        self.get_response = get_response
        markcoroutinefunction(self)
        self.members = [import_string(path)(_never_called) for path in settings.SYNC_MIDDLEWARE]
        for member in self.members:
            # Only hook-style middleware can be grouped: a middleware with its own __call__,
            # or template-response hooks, would be silently skipped.
            if not isinstance(member, MiddlewareMixin) or hasattr(
                member, "process_template_response"
            ):
                raise ImproperlyConfigured(
                    f"SYNC_MIDDLEWARE takes hook-style (MiddlewareMixin) middleware without "
                    f"process_template_response; move {type(member).__name__} to MIDDLEWARE"
                )
        self.request_hooks = [getattr(m, "process_request", None) for m in self.members]
        self.response_hooks = [getattr(m, "process_response", None) for m in self.members]
        self.view_hooks = [m.process_view for m in self.members if hasattr(m, "process_view")]
        self.exception_hooks = [
            m.process_exception for m in reversed(self.members) if hasattr(m, "process_exception")
        ]

    async def __call__(self, request: HttpRequest) -> HttpResponse:
        response, entered = await sync_to_async(self._request_phase)(request)
        if response is None:
            response = await self.get_response(request)
        result: HttpResponse = await sync_to_async(self._response_phase)(request, response, entered)
        return result

    def _request_phase(self, request: HttpRequest) -> tuple[HttpResponse | None, int]:
        """Each member's ``process_request``; the first answer and how many members saw it."""
        for index, hook in enumerate(self.request_hooks):
            if hook is None:
                continue
            try:
                response = hook(request)
            except Exception as exc:
                # Django converts it outside the member that raised: that one's own
                # process_response does not run, the ones before it do.
                return response_for_exception(request, exc), index
            if response is not None:
                return response, index + 1
        return None, len(self.members)

    def _response_phase(
        self, request: HttpRequest, response: HttpResponse, entered: int
    ) -> HttpResponse:
        for hook in reversed(self.response_hooks[:entered]):
            if hook is None:
                continue
            try:
                response = hook(request, response)
            except Exception as exc:
                response = response_for_exception(request, exc)
        return response

    def process_view(
        self, request: HttpRequest, view: Callable[..., Any], args: Any, kwargs: Any
    ) -> HttpResponse | None:
        for hook in self.view_hooks:
            if (response := hook(request, view, args, kwargs)) is not None:
                return response  # type: ignore[no-any-return]
        return None

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        for hook in self.exception_hooks:
            if (response := hook(request, exception)) is not None:
                return response  # type: ignore[no-any-return]
        return None


class OutageMiddleware:
    """A view that fails because the database cannot be reached (or stopped answering)
    answers 503 with the fault page (``ops/views.py``), not a bare 500: the person is told to
    try again, with the request id, and whether their decision was stored first. Prefixes
    with error pages of their own (the recovery API's envelope) answer as they do."""

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, OUTAGES) and own_error_page(request) is None:
            logger.error("database unavailable", exc_info=exception)
            return fault_page(request, 503)
        return None


# Never shed: the probes and the scrape must answer most of all when the process is busy.
UNBOUNDED_PATHS = ("/health/", "/metrics")


class LoadSheddingMiddleware:
    """At most ``CONSOLE_MAX_IN_FLIGHT`` signed-in people's requests served at once by this
    process, and at most ``CONSOLE_ANONYMOUS_MAX_IN_FLIGHT`` anonymous ones beside them, of
    which ``CONSOLE_ANONYMOUS_MAX_IN_FLIGHT_PER_ADDRESS`` from one client address
    (``ops/lanes.py``: which lane, and why it is chosen without the database). The next ones
    are answered at once with 503, ``Retry-After: CONSOLE_SHED_RETRY_AFTER_SECONDS`` and the
    styled, translated page that says the console is busy and that nothing was done.

    A process's views run one at a time on its one sync thread (``ops/handler.py``): requests
    beyond what it can serve only wait in line, each making every later one wait longer, until
    the person (or the balancer) gives up on a request the process will still serve. Shedding
    before any work keeps the requests it accepts fast and tells the rest, truthfully, that
    nothing happened: a decision confirmed in a shed request was not stored, and sending it
    again stores it once (docs/deployment.md, "Capacity of one replica"). The lanes keep a
    flood of anonymous requests (issue 40: 48 at once shed a supervisor's pages 8 times in 11)
    from taking signed-in people's places, and one address from taking the whole anonymous
    lane.

    Not counted: health and ``/metrics``; prefixes with error pages of their own (the recovery
    API, which has its own quotas and 429s); static files, liveness and WebSockets never reach
    Django's middleware (``ops/edge.py``). Counted per process: the bounds are per worker.
    """

    sync_capable = True
    async_capable = True

    def __init__(self, get_response: Any) -> None:
        self.get_response = get_response
        self.retry_after: int = settings.CONSOLE_SHED_RETRY_AFTER_SECONDS
        self.people = Lane(PEOPLE, limit=settings.CONSOLE_MAX_IN_FLIGHT, gauge=IN_FLIGHT)
        self.anonymous = Lane(
            ANONYMOUS,
            limit=settings.CONSOLE_ANONYMOUS_MAX_IN_FLIGHT,
            per_address=settings.CONSOLE_ANONYMOUS_MAX_IN_FLIGHT_PER_ADDRESS,
            gauge=ANONYMOUS_IN_FLIGHT,
        )
        IN_FLIGHT_LIMIT.set(self.people.limit)
        ANONYMOUS_IN_FLIGHT_LIMIT.set(self.anonymous.limit)
        if iscoroutinefunction(get_response):
            markcoroutinefunction(self)

    def __call__(self, request: HttpRequest) -> Any:
        if iscoroutinefunction(self):
            return self.__acall__(request)
        lane = self._lane(request)
        if lane is None:
            return self.get_response(request)
        address = client_address(request)
        if (refused := lane.enter(address)) is not None:
            return self._shed(request, lane, refused, address)
        try:
            return self.get_response(request)
        finally:
            lane.leave(address)

    async def __acall__(self, request: HttpRequest) -> HttpResponse:
        lane = self._lane(request)
        if lane is None:
            return await self.get_response(request)  # type: ignore[no-any-return]
        address = client_address(request)
        if (refused := lane.enter(address)) is not None:
            return self._shed(request, lane, refused, address)
        try:
            return await self.get_response(request)  # type: ignore[no-any-return]
        finally:
            lane.leave(address)

    def _lane(self, request: HttpRequest) -> Lane | None:
        """The lane the request waits in; ``None`` for what is never shed."""
        if request.path.startswith(UNBOUNDED_PATHS) or own_error_page(request) is not None:
            return None
        lane = self.people if carries_pass(request) else self.anonymous
        return lane if lane.limit or lane.per_address else None

    def _shed(self, request: HttpRequest, lane: Lane, reason: str, address: str) -> HttpResponse:
        """The busy page, in the person's language (from their cookie or browser: nothing is
        read from the database), rendered without the request's context processors."""
        extra: dict[str, Any] = {"lane": lane.name, "in_flight": lane.in_flight}
        extra["limit"] = lane.limit
        if lane is self.people:
            SHED.inc()
        else:
            # Which address took its share (or found the lane full): what an operator blocks.
            ANONYMOUS_SHED.labels(reason=reason).inc()
            extra |= {"reason": reason, "address": address}
        logger.warning("shed", extra=extra)
        with translation.override(translation.get_language_from_request(request)):
            response = fault_page(request, 503, busy=True, retry_after=self.retry_after)
        response["Retry-After"] = str(self.retry_after)
        response["Cache-Control"] = "no-store"
        return response
