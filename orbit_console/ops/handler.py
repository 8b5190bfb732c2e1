"""Django's ASGI handlers of this project: the synchronous work of every request on one thread,
and the recovery API's requests in one hop.

Django runs each ASGI request inside asgiref's ``ThreadSensitiveContext``, which gives the
request a thread pool of its own: the request's first hop to synchronous code starts a new
thread, that thread opens a new database connection, and both are thrown away when the
request ends. Profiles of the review API showed thread start-up alone as 15 % of the server's
samples (docs/performance.md). Without the context, ``sync_to_async(thread_sensitive=True)``
sends every request's synchronous work to asgiref's one shared sync thread, which keeps its
database connection (``CONN_MAX_AGE``) from one request to the next.

What that changes: a process runs one piece of synchronous work at a time. Those pieces are
short here by design (an API view is one transaction; console views hop to the sync thread
only for their own reads and never across a call to the API, docs/architecture.md), and a
replica runs several processes (``manage.py serve``), so the cores stay busy.

The recovery API (``/v1/``) is synchronous from end to end: token authentication, one
transaction, a JSON answer. ``ApiHandler`` serves it with a synchronous middleware chain of its
own (``settings.API_MIDDLEWARE``: request id, access log, security headers, host check) and
runs the whole request — the request signals, the chain, the view and closing the response —
in one hop to the sync thread. The console's chain (sessions, CSRF, people, languages, time
zones, sign-in throttling) has nothing to do for a bearer-token API and is not run.
"""

import functools
import logging
from collections.abc import Mapping
from typing import Any

import django
from asgiref.sync import sync_to_async
from django.conf import settings
from django.core import signals
from django.core.exceptions import (
    BadRequest,
    ImproperlyConfigured,
    RequestAborted,
    RequestDataTooBig,
)
from django.core.handlers.asgi import ASGIHandler, ASGIRequest, get_script_prefix
from django.core.handlers.base import BaseHandler
from django.core.handlers.exception import convert_exception_to_response
from django.http import HttpRequest, HttpResponseBadRequest
from django.http.response import HttpResponseBase
from django.urls import set_script_prefix
from django.utils import timezone, translation
from django.utils.module_loading import import_string

from orbit_console.lib.ids import new_request_id
from orbit_console.ops.middleware import REQUEST_ID_HEADER
from orbit_console.ops.views import own_error_page

logger = logging.getLogger("orbit.ops")

API_PREFIX = "/v1/"
# Marks the scope of a request the console makes to the embedded API of its own process
# (client/inprocess.py): a part of the console request that made it.
IN_PROCESS = "orbit.in_process"


def is_api_path(path: str) -> bool:
    return path.startswith(API_PREFIX) or path == API_PREFIX.rstrip("/")


class SharedThreadASGIHandler(ASGIHandler):
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)

    def create_request(  # type: ignore[override]
        self, scope: Mapping[str, Any], body_file: Any
    ) -> tuple[ASGIRequest, None] | tuple[None, HttpResponseBase]:
        """Django's, but a request it cannot even build — a ``Content-Type`` over 10 000
        characters (``BadRequest``, which Django leaves to become a bare 500 with a traceback),
        a query string that is not UTF-8 — is answered 400 with a request id, in the API's
        envelope under ``/v1/`` (issue 29), and logged as a warning without a traceback."""
        try:
            return self.request_class(scope, body_file), None
        except (BadRequest, UnicodeDecodeError, RequestDataTooBig) as refused:
            return None, unreadable_request(scope, refused)


class ApiHandler(SharedThreadASGIHandler):
    """The recovery API's requests: ``settings.API_MIDDLEWARE`` and the view, synchronously, in
    one hop to the process's sync thread."""

    def __init__(self) -> None:
        BaseHandler.__init__(self)
        self._load_api_middleware()

    def _load_api_middleware(self) -> None:
        """Django's ``load_middleware`` for a synchronous chain of ``API_MIDDLEWARE``."""
        self._view_middleware: list[Any] = []
        self._template_response_middleware: list[Any] = []
        self._exception_middleware: list[Any] = []
        handler = convert_exception_to_response(self._get_response)  # type: ignore[attr-defined]
        for path in reversed(settings.API_MIDDLEWARE):
            middleware = import_string(path)
            if not getattr(middleware, "sync_capable", True):
                raise ImproperlyConfigured(f"API_MIDDLEWARE takes synchronous middleware: {path}")
            instance = middleware(handler)
            if hasattr(instance, "process_view"):
                self._view_middleware.insert(0, instance.process_view)
            if hasattr(instance, "process_template_response"):
                self._template_response_middleware.append(instance.process_template_response)
            if hasattr(instance, "process_exception"):
                self._exception_middleware.append(instance.process_exception)
            handler = convert_exception_to_response(instance)
        self._middleware_chain = handler

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        try:
            body_file = await self.read_body(receive)
        except RequestAborted:
            return
        response = await sync_to_async(self._respond, thread_sensitive=True)(scope, body_file)
        try:
            await self.send_response(response, send)
        finally:
            if response.streaming:  # closed once its body was sent, as Django does
                await sync_to_async(response.close, thread_sensitive=True)()

    def _respond(self, scope: dict[str, Any], body_file: Any) -> HttpResponseBase:
        """What Django's handler does around the view, synchronously. The API answers in
        English in UTC, whatever the context it was called from (an in-process call from a
        console page in another language and zone, ``client/inprocess.py``).

        A request from the console of this process is part of the console request that made
        it, on the same thread and database connection: that request's start and end signals
        look after the connection (``close_old_connections``, with its health check), so this
        one sends none. Its answer is bytes, with nothing else to close."""
        outermost = not scope.get(IN_PROCESS)
        with body_file, translation.override(settings.LANGUAGE_CODE), timezone.override(None):
            set_script_prefix(get_script_prefix(scope))
            if outermost:
                signals.request_started.send(sender=self.__class__, scope=scope)
            request, error_response = self.create_request(scope, body_file)
            if request is None:
                response: HttpResponseBase = error_response  # type: ignore[assignment]
            else:
                response = self.get_response(request)
                response._handler_class = self.__class__  # type: ignore[attr-defined]
            if outermost and not response.streaming:
                response.close()  # fires request_finished: the connection's end-of-request care
            return response


def unreadable_request(scope: Mapping[str, Any], refused: Exception) -> HttpResponseBase:
    """The 400 of a request Django could not build: its prefix's error page (the API's
    envelope) or an empty 400, with a fresh request id in the header and the log line."""
    request = HttpRequest()
    request.path = request.path_info = scope.get("path", "/")
    request.method = scope.get("method", "GET")
    request_id = new_request_id()
    request.request_id = request_id  # type: ignore[attr-defined]
    logger.warning(
        "unreadable request",
        extra={
            "request_id": request_id,
            "error": type(refused).__name__,
            "method": request.method,
            "path": request.path,
        },
    )
    page = own_error_page(request)
    response = page(request, 400) if page is not None else HttpResponseBadRequest()
    response[REQUEST_ID_HEADER] = request_id
    return response


def get_asgi_application() -> SharedThreadASGIHandler:
    """``django.core.asgi.get_asgi_application`` with the shared-thread handler."""
    django.setup(set_prefix=False)
    return SharedThreadASGIHandler()


@functools.cache
def get_api_application() -> ApiHandler:
    """The process's recovery API handler (Django must be set up): the edge's and the
    in-process client's."""
    return ApiHandler()
