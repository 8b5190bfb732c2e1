"""Health endpoints (O7, I7) and the project's error pages (in the API's envelope under /v1/,
through the hook the ledger registers)."""

import asyncio
from collections.abc import Callable

from channels.layers import get_channel_layer
from django.db import connection
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.template.loader import render_to_string
from django.views import defaults
from django.views.decorators.http import require_GET

READY_TIMEOUT_SECONDS = 2.0


@require_GET
async def live(request: HttpRequest) -> JsonResponse:
    """The process answers. Nothing else is checked: a restart would not fix a dependency.
    Under ASGI the edge answers this path before Django (``ops/edge.py``); this view answers
    under WSGI and Django's test client."""
    return JsonResponse({"status": "live"})


@require_GET
async def ready(request: HttpRequest) -> JsonResponse:
    """503 while the database or the channel layer cannot be reached."""
    checks = await dependency_checks()
    ok = all(value == "ok" for value in checks.values())
    return JsonResponse(
        {"status": "ready" if ok else "unavailable", "checks": checks}, status=200 if ok else 503
    )


async def dependency_checks() -> dict[str, str]:
    """Whether the database and the channel layer answer, each within
    ``READY_TIMEOUT_SECONDS``: "ok", or the error's type (``/health/ready``, ``/metrics``)."""
    return {
        "database": await _check(asyncio.to_thread(_database_ok)),
        "channel_layer": await _check(_channel_layer_ok()),
    }


async def _check(probe) -> str:  # type: ignore[no-untyped-def]
    try:
        await asyncio.wait_for(probe, timeout=READY_TIMEOUT_SECONDS)
    except Exception as exc:
        return f"error: {type(exc).__name__}"
    return "ok"


def _database_ok() -> None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    finally:
        connection.close()


async def _channel_layer_ok() -> None:
    layer = get_channel_layer()
    if layer is None:
        raise RuntimeError("no channel layer configured")
    await layer.group_send("health.probe", {"type": "health.probe"})


# The error pages of URL prefixes that answer in a format of their own (the recovery API's
# envelope), registered by the app that owns the prefix: ops depends on no app above it.
type ErrorPage = Callable[[HttpRequest, int], HttpResponse]
_ERROR_PAGES: dict[str, ErrorPage] = {}


def register_error_page(prefix: str, page: ErrorPage) -> None:
    _ERROR_PAGES[prefix] = page


def _error_page(request: HttpRequest, status: int) -> HttpResponse:
    page = own_error_page(request)
    if page is not None:
        return page(request, status)
    return render(request, f"{status}.html", status=status)


def own_error_page(request: HttpRequest) -> ErrorPage | None:
    """The error page of the prefix ``request`` is under, if its app registered one."""
    for prefix, page in _ERROR_PAGES.items():
        if request.path.startswith(prefix):
            return page
    return None


# --- Pages that tell the truth during a fault (issue 14) -------------------------------------


def remember_stored(request: HttpRequest, url: str) -> None:
    """Say that the person's decision was stored, at ``url``, before whatever may fail next:
    a fault page for this request then says so and links to it."""
    request.orbit_stored_url = url  # type: ignore[attr-defined]


def fault_page(
    request: HttpRequest, status: int, *, busy: bool = False, retry_after: int = 0
) -> HttpResponse:
    """The styled, translated 500 or 503 page, with the request id and, when the person's
    decision was stored before the fault, a link to it. Rendered without the request's context
    processors: nothing on it reads the database that may be the fault. ``busy``: the 503 of
    load shedding (``ops/middleware.LoadSheddingMiddleware``), asked again after
    ``retry_after`` seconds."""
    context = {
        "status": status,
        "busy": busy,
        "retry_after": retry_after,
        "resend": busy and request.method == "POST",
        "request_id": getattr(request, "request_id", ""),
        "stored_url": getattr(request, "orbit_stored_url", ""),
    }
    return HttpResponse(render_to_string("errors/fault.html", context), status=status)


def bad_request(request: HttpRequest, exception: Exception) -> HttpResponse:
    """``handler400``: a request Django refuses as suspicious or unreadable (too many query
    parameters, a Host it does not serve). Prefixes with error pages of their own answer as
    they do; elsewhere, Django's own page."""
    page = own_error_page(request)
    if page is not None:
        return page(request, 400)
    return defaults.bad_request(request, exception)


def server_error(request: HttpRequest) -> HttpResponse:
    page = own_error_page(request)
    if page is not None:
        return page(request, 500)
    return fault_page(request, 500)


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _error_page(request, 404)


def permission_denied(request: HttpRequest, exception: Exception) -> HttpResponse:
    return _error_page(request, 403)
