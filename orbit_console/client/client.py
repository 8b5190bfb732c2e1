"""``OrbitClient``: GetTask, ListTasks, ListAttempts, ReviewTask, RetryTask,
ListTaskOperations and GetTaskOperation over HTTP.

The client is asynchronous (console views and consumers are async; management commands run
it under ``asyncio``). It never invents idempotency keys and never retries on its own (C9):
a timeout, a lost connection or a 5xx raises ``OutcomeUnknown`` and the caller decides. Every
other non-success raises ``OrbitError`` with status, code, message, request id and
``retry_after_ms``.

It trusts no server, the embedded one included: every answer is bounded in size
(``max_answer_bytes``: the body is streamed and the reading stops past the cap) and in time
(``deadline``: the whole exchange, since httpx's timeouts are per read and a server that drips
a byte every few seconds never trips one), and read against the API's schema into the typed
objects of ``types.py``. An answer that breaks one of these, or that is about something else
than what was asked (another task's record), raises ``BadAnswer``, an unknown outcome of its
own kind (``errors.py``).
"""

import asyncio
import functools
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx

from orbit_console.client.errors import (
    MISMATCHED,
    TOO_LARGE,
    BadAnswer,
    OrbitError,
    OutcomeUnknown,
    malformed,
)
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
DEFAULT_DEADLINE = 30.0  # seconds for a whole exchange: connecting, sending, the full answer
DEFAULT_MAX_ANSWER_BYTES = 4 * 1024 * 1024


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
        deadline: float = DEFAULT_DEADLINE,
        max_answer_bytes: int = DEFAULT_MAX_ANSWER_BYTES,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._deadline = deadline
        self._max_answer_bytes = max_answer_bytes
        self._http = httpx.AsyncClient(
            base_url=base_url.rstrip("/"),
            # Identity only: a compressed answer could grow a thousandfold past the cap in one
            # chunk before it is counted.
            headers={
                "Authorization": f"Bearer {token}",
                "Accept": "application/json",
                "Accept-Encoding": "identity",
            },
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
        return await self._call("GET", "/v1/credential", read=_data(CredentialInfo.from_json))

    async def get_task(self, task_id: str) -> Task:
        def read(data: Any, meta: Meta) -> Task:
            task = Task.from_json(data)
            _same("task.id", task.id, task_id)
            return task

        return await self._call("GET", f"/v1/tasks/{_segment(task_id)}", read=read)

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
        order: str | None = None,
        count: bool | None = None,
    ) -> Page[TaskSummary]:
        """ListTasks. ``updated_after`` (inclusive) and ``updated_before`` (exclusive) must be
        aware datetimes; they are sent in UTC. ``business_key`` and ``business_key_prefix``
        exclude each other (the API answers 400). ``order``: one of the API's (created_desc
        by default); ``count``: ask for the page's total (capped, docs/api.md)."""
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
            order=order,
            count="true" if count else None,
        )

        def read(data: Any, meta: Meta) -> Page[TaskSummary]:
            return Page.from_json(data, TaskSummary.from_json)

        return await self._call("GET", "/v1/tasks", params=params, read=read)

    async def list_attempts(
        self, task_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Attempt]:
        def read(data: Any, meta: Meta) -> Page[Attempt]:
            page = Page.from_json(data, Attempt.from_json)
            for attempt in page.items:
                if attempt.task_id:
                    _same("attempt.task_id", attempt.task_id, task_id)
            return page

        path = f"/v1/tasks/{_segment(task_id)}/attempts"
        return await self._call("GET", path, params=_params(limit=limit, cursor=cursor), read=read)

    async def list_task_operations(
        self, task_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Operation]:
        def read(data: Any, meta: Meta) -> Page[Operation]:
            page = Page.from_json(data, Operation.from_json)
            for operation in page.items:
                _same("operation.task_id", operation.task_id, task_id)  # AU1: never another's
            return page

        path = f"/v1/tasks/{_segment(task_id)}/operations"
        return await self._call("GET", path, params=_params(limit=limit, cursor=cursor), read=read)

    async def get_task_operation(self, task_id: str, audit_id: str) -> OperationDetail:
        def read(data: Any, meta: Meta) -> OperationDetail:
            operation = OperationDetail.from_json(data)
            # AU5: the record asked for, of the task asked for (the feed publishes it to that
            # task's timeline).
            _same("operation.task_id", operation.task_id, task_id)
            _same("operation.id", operation.id, audit_id)
            return operation

        path = f"/v1/tasks/{_segment(task_id)}/operations/{_segment(audit_id)}"
        return await self._call("GET", path, read=read)

    # --- Writes -------------------------------------------------------------------------------

    async def review_task(
        self, task_id: str, *, idempotency_key: str, body: ReviewTaskRequest | str
    ) -> ReviewReceipt:
        """RV. ``body`` may be the exact JSON text of an earlier attempt (a resend, C9)."""

        def read(data: Any, meta: Meta) -> ReviewReceipt:
            receipt = ReviewReceipt.from_json(data, meta.request_id)
            _same("receipt.task.id", receipt.task.id, task_id)
            return receipt

        path = f"/v1/tasks/{_segment(task_id)}:review"
        return await self._write(path, idempotency_key, body, read=read)

    async def retry_task(
        self, task_id: str, *, idempotency_key: str, body: RetryTaskRequest | str
    ) -> RetryReceipt:
        """RT. ``created`` tells a first success (201) from a replay (200)."""

        def read(data: Any, meta: Meta) -> RetryReceipt:
            receipt = RetryReceipt.from_json(data, meta.request_id, created=meta.status == 201)
            _same("receipt.source_task_id", receipt.source_task_id, task_id)
            if receipt.task.retry_of is not None:
                _same("receipt.task.retry_of", receipt.task.retry_of, task_id)
            return receipt

        path = f"/v1/tasks/{_segment(task_id)}:retry"
        return await self._write(path, idempotency_key, body, read=read)

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
        return await self._call(
            "POST",
            "/v1/subscriptions",
            content=strictjson.dumps(body).encode(),
            headers=headers,
            read=_data(Subscription.from_json),
        )

    async def get_subscription(self, subscription_id: str) -> Subscription:
        def read(data: Any, meta: Meta) -> Subscription:
            subscription = Subscription.from_json(data)
            _same("subscription.id", subscription.id, subscription_id)
            return subscription

        return await self._call("GET", f"/v1/subscriptions/{_segment(subscription_id)}", read=read)

    async def _write(
        self,
        path: str,
        idempotency_key: str,
        body: ReviewTaskRequest | RetryTaskRequest | str,
        *,
        read: "Reader[T]",
    ) -> T:
        if not idempotency_key:
            raise ValueError("the caller must pass the idempotency key it stored (C9, I1)")
        content = body if isinstance(body, str) else body.to_json()
        headers = {"Content-Type": "application/json", "Idempotency-Key": idempotency_key}
        return await self._call("POST", path, content=content.encode(), headers=headers, read=read)

    # --- Transport ----------------------------------------------------------------------------

    async def _call(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, str] | None = None,
        content: bytes | None = None,
        headers: dict[str, str] | None = None,
        read: "Reader[T]",
    ) -> T:
        """One request, its answer read by ``read`` (the typed object, or ``BadAnswer``),
        observed: a log line (operation, outcome, the API's request id, time) and a counter.
        Never the token, the body, a business key or a result."""
        operation = _operation_name(method, path)
        caller = current_request_id.get()
        if caller:
            headers = {**(headers or {}), "X-Caller-Request-Id": caller}
        started = time.perf_counter()
        outcome = "unknown"
        api_request_id = None
        try:
            data, meta = await self._send(method, path, params, content, headers)
            api_request_id = meta.request_id
            try:
                answer = read(data, meta)
            except BadAnswer as bad:
                bad.status, bad.request_id = meta.status, meta.request_id
                raise
            outcome = str(meta.status)
            return answer
        except OrbitError as error:
            outcome, api_request_id = str(error.status), error.request_id
            raise
        except BadAnswer as bad:
            outcome = f"bad_answer_{bad.kind}"
            api_request_id = bad.request_id
            logger.warning("orbit api answer refused: %s", bad, extra={"operation": operation})
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
    ) -> tuple[Any, "Meta"]:
        request = self._http.build_request(
            method, path, params=params, content=content, headers=headers
        )
        try:
            async with asyncio.timeout(self._deadline):
                response = await self._http.send(request, stream=True)
                try:
                    body = await self._body(response)
                finally:
                    await response.aclose()
        except httpx.TimeoutException as exc:
            raise OutcomeUnknown(f"no answer in time ({type(exc).__name__})") from exc
        except httpx.TransportError as exc:
            raise OutcomeUnknown(f"connection failed ({type(exc).__name__})") from exc
        except TimeoutError as exc:
            raise OutcomeUnknown(f"no whole answer within {self._deadline:g} s") from exc
        status = response.status_code
        document = _document(body)
        request_id = _text(document.get("request_id")) if isinstance(document, dict) else None
        error = document.get("error") if isinstance(document, dict) else None
        if not isinstance(error, dict):
            error = {}
        if status >= 500:
            raise OutcomeUnknown(
                f"the server answered {status}",
                status=status,
                code=_text(error.get("code")),
                request_id=request_id,
            )
        if status >= 300:
            if not isinstance(document, dict):
                raise OrbitError(status, "BAD_RESPONSE", "the answer is not JSON")
            retry_after = error.get("retry_after_ms")
            raise OrbitError(
                status=status,
                code=_text(error.get("code")) or "UNKNOWN",
                message=_text(error.get("message")) or "",
                request_id=request_id,
                retry_after_ms=retry_after if _is_integer(retry_after) else None,
                field=_text(error.get("field")),
            )
        # A success that is not the API's envelope tells nothing: a write may have been applied.
        if not isinstance(document, dict):
            raise BadAnswer("the answer is not a JSON object", status=status)
        if "data" not in document:
            raise BadAnswer("the answer has no data", status=status, request_id=request_id)
        return document["data"], Meta(request_id=request_id, status=status)

    async def _body(self, response: httpx.Response) -> bytes:
        """The whole body, or ``BadAnswer`` as soon as it is known to pass the cap: the
        length the server declared, else what has come so far."""
        cap = self._max_answer_bytes
        declared = response.headers.get("Content-Length", "")
        if declared.isdigit() and int(declared) > cap:
            raise BadAnswer(f"the answer declares {declared} bytes, over {cap}", kind=TOO_LARGE)
        encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
        if encoding != "identity":
            raise malformed(f"the answer is encoded ({encoding!r:.40}), which was not asked for")
        chunks: list[bytes] = []
        size = 0
        async for chunk in response.aiter_raw():
            size += len(chunk)
            if size > cap:
                raise BadAnswer(f"the answer is longer than {cap} bytes", kind=TOO_LARGE)
            chunks.append(chunk)
        return b"".join(chunks)


@dataclass(frozen=True, slots=True)
class Meta:
    """What the envelope of a success said besides its data."""

    request_id: str | None
    status: int


type Reader[T] = Callable[[Any, Meta], T]


def _data[T](build: Callable[[Any], T]) -> Reader[T]:
    """A reader that only builds the typed object from the answer's data."""
    return lambda data, meta: build(data)


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


def _document(body: bytes) -> Any:
    """The answer parsed exactly (no float), or ``None`` when it is not JSON."""
    try:
        return strictjson.loads(strictjson.decode_text(body))
    except strictjson.JSONError:
        return None


def _text(value: Any) -> str | None:
    """A member of an error envelope that should be a string (and is dropped if not)."""
    return value if isinstance(value, str) else None


def _is_integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _same(what: str, answered: str, asked: str) -> None:
    """The answer is about what was asked: another task's record, published as this task's,
    would put it on the wrong timeline."""
    if answered != asked:
        raise BadAnswer(
            f"{what} is {answered!r:.40}, not the {asked!r:.40} asked for", kind=MISMATCHED
        )


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
