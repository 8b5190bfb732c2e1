"""``OrbitClient``: GetTask, ListTasks, ListAttempts, ReviewTask, RetryTask,
ListTaskOperations and GetTaskOperation over HTTP.

The client is asynchronous (console views and consumers are async; management commands run
it under ``asyncio``). It never invents idempotency keys and never retries on its own (C9):
a timeout, a lost connection or a 5xx raises ``OutcomeUnknown`` and the caller decides. Every
other non-success raises ``OrbitError`` with status, code, message, request id and
``retry_after_ms``. Timeouts are explicit.
"""

import functools
import logging
import ssl
import time
from collections.abc import Callable
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx

from orbit_console.client.errors import OrbitError, OutcomeUnknown
from orbit_console.client.types import (
    Attempt,
    CredentialInfo,
    Operation,
    OperationDetail,
    Page,
    RetryReceipt,
    RetryTaskRequest,
    ReviewReceipt,
    ReviewTaskRequest,
    Subscription,
    Task,
    TaskSummary,
)
from orbit_console.lib import strictjson
from orbit_console.lib.rfc3339 import format_utc
from orbit_console.ops.context import current_request_id
from orbit_console.ops.metrics import API_CALLS

logger = logging.getLogger("orbit.client")

T = TypeVar("T")

DEFAULT_TIMEOUT = httpx.Timeout(connect=5.0, read=30.0, write=30.0, pool=5.0)


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """httpx's default TLS settings, built once per process. Building them loads the CA bundle,
    tens of milliseconds of CPU on the event loop, and the console makes a client per request
    and per timeline socket check (docs/performance.md)."""
    return httpx.create_ssl_context()


class OrbitClient:
    """A client for one credential. Use as ``async with OrbitClient(...) as orbit:``."""

    def __init__(
        self,
        base_url: str,
        token: str,
        *,
        timeout: httpx.Timeout = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            headers={"Authorization": f"Bearer {token}", "Accept": "application/json"},
            timeout=timeout,
            transport=transport,
            follow_redirects=False,
            verify=_tls_context(),
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    # --- Reads --------------------------------------------------------------------------------

    async def get_credential(self) -> CredentialInfo:
        data, _ = await self._call("GET", "/v1/credential")
        return CredentialInfo.from_json(data)

    async def get_task(self, task_id: str) -> Task:
        data, _ = await self._call("GET", f"/v1/tasks/{_segment(task_id)}")
        return Task.from_json(data)

    async def list_tasks(
        self,
        *,
        states: tuple[str, ...] = (),
        queue_id: str | None = None,
        handler: str | None = None,
        business_key: str | None = None,
        business_key_prefix: str | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        error: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[TaskSummary]:
        """ListTasks. ``updated_after`` (inclusive) and ``updated_before`` (exclusive) must be
        aware datetimes; they are sent in UTC. ``business_key`` and ``business_key_prefix``
        exclude each other (the API answers 400)."""
        params = _params(
            state=",".join(states) or None,
            queue_id=queue_id,
            handler=handler,
            business_key=business_key,
            business_key_prefix=business_key_prefix,
            updated_after=_time(updated_after),
            updated_before=_time(updated_before),
            error=error,
            limit=limit,
            cursor=cursor,
        )
        data, _ = await self._call("GET", "/v1/tasks", params=params)
        return _page(data, TaskSummary.from_json)

    async def list_attempts(
        self, task_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Attempt]:
        path = f"/v1/tasks/{_segment(task_id)}/attempts"
        data, _ = await self._call("GET", path, params=_params(limit=limit, cursor=cursor))
        return _page(data, Attempt.from_json)

    async def list_task_operations(
        self, task_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Operation]:
        path = f"/v1/tasks/{_segment(task_id)}/operations"
        data, _ = await self._call("GET", path, params=_params(limit=limit, cursor=cursor))
        return _page(data, Operation.from_json)

    async def get_task_operation(self, task_id: str, audit_id: str) -> OperationDetail:
        path = f"/v1/tasks/{_segment(task_id)}/operations/{_segment(audit_id)}"
        data, _ = await self._call("GET", path)
        return OperationDetail.from_json(data)

    # --- Writes -------------------------------------------------------------------------------

    async def review_task(
        self, task_id: str, *, idempotency_key: str, body: ReviewTaskRequest | str
    ) -> ReviewReceipt:
        """RV. ``body`` may be the exact JSON text of an earlier attempt (a resend, C9)."""
        data, response = await self._write(
            f"/v1/tasks/{_segment(task_id)}:review", idempotency_key, body
        )
        return ReviewReceipt(
            task=Task.from_json(data["task"]),
            audit_id=data["audit_id"],
            deduplicated=data["deduplicated"],
            request_id=response.get("request_id"),
        )

    async def retry_task(
        self, task_id: str, *, idempotency_key: str, body: RetryTaskRequest | str
    ) -> RetryReceipt:
        """RT. ``created`` tells a first success (201) from a replay (200)."""
        data, response = await self._write(
            f"/v1/tasks/{_segment(task_id)}:retry", idempotency_key, body
        )
        return RetryReceipt(
            source_task_id=data["source_task_id"],
            task=Task.from_json(data["task"]),
            audit_id=data["audit_id"],
            deduplicated=data["deduplicated"],
            request_id=response.get("request_id"),
            created=response["_status"] == 201,
        )

    # --- The event stream's subscriptions (docs/events.md) -----------------------------------

    async def create_subscription(
        self, *, name: str, idempotency_key: str, queue_ids: tuple[str, ...] = ()
    ) -> Subscription:
        """Subscribe to the credential's namespace (or these queues of it); the same key again
        answers the subscription it created (E1: an Orbit without the stream answers 404)."""
        body: dict[str, Any] = {"name": name}
        if queue_ids:
            body["queue_ids"] = list(queue_ids)
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key}
        data, _ = await self._call(
            "POST", "/v1/subscriptions", content=strictjson.dumps(body).encode(), headers=headers
        )
        return Subscription.from_json(data)

    async def get_subscription(self, subscription_id: str) -> Subscription:
        data, _ = await self._call("GET", f"/v1/subscriptions/{_segment(subscription_id)}")
        return Subscription.from_json(data)

    async def _write(
        self, path: str, idempotency_key: str, body: ReviewTaskRequest | RetryTaskRequest | str
    ) -> tuple[Any, dict[str, Any]]:
        if not idempotency_key:
            raise ValueError("the caller must pass the idempotency key it stored (C9, I1)")
        content = body if isinstance(body, str) else body.to_json()
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key}
        return await self._call("POST", path, content=content.encode(), headers=headers)

    # --- Transport ----------------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
    ) -> tuple[Any, dict[str, Any]]:
        """One request, observed: a log line (operation, outcome, the API's request id, time)
        and a counter. Never the token, the body, a business key or a result."""
        operation = _operation_name(method, path)
        caller = current_request_id.get()
        if caller:
            headers = {**(headers or {}), "X-Caller-Request-Id": caller}
        started = time.perf_counter()
        outcome = "unknown"
        api_request_id = None
        try:
            data, meta = await self._send(method, path, params, content, headers)
            outcome, api_request_id = str(meta["_status"]), meta.get("request_id")
            return data, meta
        except OrbitError as error:
            outcome, api_request_id = str(error.status), error.request_id
            raise
        except OutcomeUnknown as unknown:
            outcome = "unknown"
            api_request_id = unknown.request_id
            raise
        finally:
            API_CALLS.labels(operation=operation, outcome=outcome).inc()
            logger.info(
                "orbit api call",
                extra={
                    "operation": operation,
                    "outcome": outcome,
                    "api_request_id": api_request_id,
                    "duration_ms": round((time.perf_counter() - started) * 1000, 1),
                },
            )

    async def _send(
        self,
        method: str,
        path: str,
        params: dict[str, str] | None,
        content: bytes | None,
        headers: dict[str, str] | None,
    ) -> tuple[Any, dict[str, Any]]:
        try:
            response = await self._http.request(
                method, path, params=params, content=content, headers=headers
            )
        except httpx.TimeoutException as exc:
            raise OutcomeUnknown(f"no answer in time ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise OutcomeUnknown(f"connection failed ({type(exc).__name__})") from exc
        document = _document(response)
        request_id = document.get("request_id") if isinstance(document, dict) else None
        if response.status_code >= 500:
            error = document.get("error", {}) if isinstance(document, dict) else {}
            raise OutcomeUnknown(
                f"the server answered {response.status_code}",
                status=response.status_code,
                code=error.get("code") if isinstance(error, dict) else None,
                request_id=request_id,
            )
        if not isinstance(document, dict):
            raise OrbitError(response.status_code, "BAD_RESPONSE", "the answer is not JSON")
        if response.status_code >= 300:
            error = document.get("error") or {}
            raise OrbitError(
                status=response.status_code,
                code=error.get("code", "UNKNOWN"),
                message=error.get("message", ""),
                request_id=request_id,
                retry_after_ms=error.get("retry_after_ms"),
                field=error.get("field"),
            )
        return document.get("data"), {"request_id": request_id, "_status": response.status_code}


def _operation_name(method: str, path: str) -> str:
    """GetTask, ReviewTask, ... from the request line (ids never reach the metric labels)."""
    parts = path.strip("/").split("/")  # v1, tasks, <id>[:verb], operations|attempts, <id>
    if parts[1] == "credential":
        return "GetCredential"
    if parts[1] == "subscriptions":
        return "GetSubscription" if len(parts) == 3 else "CreateSubscription"
    if len(parts) == 2:
        return "ListTasks"
    if len(parts) == 3:
        verb = parts[2].partition(":")[2]
        return {"review": "ReviewTask", "retry": "RetryTask"}.get(verb, "GetTask")
    if parts[3] == "attempts":
        return "ListAttempts"
    return "GetTaskOperation" if len(parts) == 5 else "ListTaskOperations"


def _document(response: httpx.Response) -> Any:
    """The answer parsed exactly (no float), or ``None`` when it is not JSON."""
    try:
        return strictjson.loads(strictjson.decode_text(response.content))
    except strictjson.JSONError:
        return None


def _segment(value: str) -> str:
    return quote(value, safe="")


def _time(value: datetime | None) -> str | None:
    if value is None:
        return None
    if value.utcoffset() is None:
        # astimezone() would read a naive time as the process's local time: a silent shift.
        raise ValueError("a filter time must be timezone-aware")
    return format_utc(value)


def _params(**values: object) -> dict[str, str]:
    return {name: str(value) for name, value in values.items() if value is not None}


def _page[T](data: dict[str, Any], build: Callable[[dict[str, Any]], T]) -> Page[T]:
    return Page(items=[build(item) for item in data["items"]], next_cursor=data.get("next_cursor"))
