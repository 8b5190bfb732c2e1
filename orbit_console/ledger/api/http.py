"""The HTTP edge of the recovery API: one decorator authenticates and authorises every
endpoint, and one helper shapes every answer, success or error (E).

Check order (O3): 401 credential -> 403 permission -> 400 request shape (path ids, query,
headers, body) -> 404 scope -> idempotency -> 409 / time-dependent 400 -> 429. The decorator
does the first two; views do the 400s they can decide alone; services do the rest.
"""

import logging
import math
import re
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.csrf import csrf_exempt

from orbit_console.ledger.auth import authenticate
from orbit_console.ledger.errors import (
    ApiError,
    InvalidArgument,
    MethodNotAllowed,
    NotFound,
    PermissionDenied,
    Unauthenticated,
    Unavailable,
)
from orbit_console.lib.ids import is_id, new_request_id
from orbit_console.lib.numbers import decimal_in
from orbit_console.lib.strictjson import dumps
from orbit_console.ops.metrics import API_ANSWERS

logger = logging.getLogger("orbit.api")

_IDEMPOTENCY_KEY = re.compile(r"[\x21-\x7e]{1,255}")  # O4: visible ASCII

Answer = tuple[int, dict[str, Any]]
Endpoint = Callable[..., Answer]


def request_id_of(request: HttpRequest) -> str:
    request_id = getattr(request, "request_id", None)
    if request_id is None:
        request_id = request.request_id = new_request_id()  # type: ignore[attr-defined]
    return request_id


def json_response(request: HttpRequest, status: int, body: dict[str, Any]) -> HttpResponse:
    response = HttpResponse(
        dumps({"request_id": request_id_of(request), **body}).encode(),
        status=status,
        content_type="application/json",
    )
    response["Cache-Control"] = "no-store"
    return response


def error_page(request: HttpRequest, status: int) -> HttpResponse:
    """The project's 400, 404 and 500 pages under ``/v1/``, in the API's envelope. A 400 here
    is a request Django could not read before any view saw it (a header it cannot parse, a
    query string over its limits, a Host it does not serve)."""
    error: ApiError
    if status == 400:
        error = InvalidArgument(
            "the request could not be read: a header, the path or the query string is "
            "malformed or too large"
        )
    elif status == 404:
        error = NotFound("no such endpoint")
    else:
        error = ApiError("internal error")
    return error_response(request, error)


def error_response(request: HttpRequest, error: ApiError) -> HttpResponse:
    response = json_response(
        request,
        error.status,
        {"error": {"code": error.code, "message": error.message, **error.details}},
    )
    retry_after_ms = error.details.get("retry_after_ms")
    if retry_after_ms is not None:
        response["Retry-After"] = str(max(1, math.ceil(retry_after_ms / 1000)))
    # RFC 9110 requires these: a 401 names the scheme, a 405 the methods the endpoint answers.
    if isinstance(error, Unauthenticated):
        response["WWW-Authenticate"] = 'Bearer realm="orbit"'
    if isinstance(error, MethodNotAllowed):
        response["Allow"] = error.details.get("allow", "")
    return response


def api_endpoint(
    *, method: str, permission: str | None
) -> Callable[[Endpoint], Callable[..., HttpResponse]]:
    """Wrap a view ``(request, credential, **path) -> (status, data)``."""

    def decorate(view: Endpoint) -> Callable[..., HttpResponse]:
        @csrf_exempt
        @wraps(view)
        def endpoint(request: HttpRequest, **path: str) -> HttpResponse:
            response = _answer(request, path)
            API_ANSWERS.labels(endpoint=view.__name__, status=response.status_code).inc()
            logger.info(
                "api answer",
                extra={
                    "endpoint": view.__name__,
                    "status": response.status_code,
                    "task_id": path.get("task_id", path.get("ref", ""))[:40],
                    "caller_request_id": _caller_request_id(request),
                },
            )
            return response

        def _answer(request: HttpRequest, path: dict[str, str]) -> HttpResponse:
            try:
                if request.method != method:
                    raise MethodNotAllowed(f"this endpoint answers {method} only", allow=method)
                credential = authenticate(request, now=timezone.now())
                if permission is not None and permission not in credential.permission_set:
                    raise PermissionDenied(f"the credential lacks the {permission} permission")
                status, data = view(request, credential, **path)
            except ApiError as error:
                return error_response(request, error)
            except (OperationalError, InterfaceError) as exc:
                # The database went away mid-request: the write may or may not have committed.
                logger.warning("database unavailable: %s", type(exc).__name__)
                return error_response(
                    request,
                    Unavailable("the ledger is unavailable; the request may have been applied"),
                )
            except DatabaseError as exc:
                # The type and the driver's error code only: a database message can quote data.
                code = exc.args[0] if exc.args and isinstance(exc.args[0], int) else None
                logger.error("database error", extra={"error": type(exc).__name__, "code": code})
                return error_response(
                    request,
                    Unavailable("the ledger is unavailable; the request may have been applied"),
                )
            return json_response(request, status, {"data": data})

        return endpoint

    return decorate


def _caller_request_id(request: HttpRequest) -> str | None:
    """The console's request id, when a console called: logs of both sides then join."""
    caller = request.headers.get("X-Caller-Request-Id", "")
    return caller if is_id(caller) else None


def not_found(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
    """Any /v1 path this server does not know (E1): 404 in the envelope, never a fallback."""
    return error_response(request, NotFound("no such endpoint"))


# --- Request parts ----------------------------------------------------------------------------


def path_id(value: str, name: str) -> str:
    if not is_id(value):
        raise InvalidArgument(f"{name}: must be 32 lowercase hexadecimal characters", field=name)
    return value


def query(request: HttpRequest, allowed: set[str]) -> dict[str, str]:
    """AU2: only known parameters, each at most once."""
    params: dict[str, str] = {}
    for name in request.GET:
        if name not in allowed:
            raise InvalidArgument(f"unknown query parameter {name!r}", field=name)
        values = request.GET.getlist(name)
        if len(values) != 1:
            raise InvalidArgument(f"{name}: may appear at most once", field=name)
        params[name] = values[0]
    return params


def limit_param(params: dict[str, str], *, default: int = 20, maximum: int = 100) -> int:
    text = params.get("limit")
    if text is None:
        return default
    try:
        return decimal_in(text, 1, maximum)
    except ValueError:
        raise InvalidArgument(
            f"limit: must be an integer from 1 to {maximum}", field="limit"
        ) from None


def cursor_param(params: dict[str, str], *, max_chars: int) -> str | None:
    cursor = params.get("cursor")
    if cursor is None:
        return None
    if not cursor or len(cursor) > max_chars:
        raise InvalidArgument(f"cursor: must be 1 to {max_chars} characters", field="cursor")
    return cursor


def write_request(request: HttpRequest) -> tuple[str, bytes]:
    """C2, O4: the idempotency key and the raw body of a write."""
    query(request, allowed=set())
    charset = (request.content_params or {}).get("charset", "utf-8").lower()
    if request.content_type != "application/json" or charset not in ("utf-8", "utf8"):
        raise InvalidArgument("Content-Type must be application/json", field="Content-Type")
    key = request.headers.get("Idempotency-Key")
    if key is None:
        raise InvalidArgument("the Idempotency-Key header is required", field="Idempotency-Key")
    if _IDEMPOTENCY_KEY.fullmatch(key) is None:
        raise InvalidArgument(
            "Idempotency-Key must be 1 to 255 visible ASCII characters", field="Idempotency-Key"
        )
    try:
        body = request.body
    except RequestDataTooBig:
        raise InvalidArgument("the body is too large") from None
    return key, body
