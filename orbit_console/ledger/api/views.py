"""The /v1 endpoints: parse, call a selector or a service, answer. Nothing else."""

from datetime import datetime
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.views.decorators.csrf import csrf_exempt

from orbit_console.ledger import selectors, services
from orbit_console.ledger.api.http import (
    Answer,
    api_endpoint,
    cursor_param,
    limit_param,
    not_found,
    path_id,
    query,
    write_request,
)
from orbit_console.ledger.auth import queue_scope
from orbit_console.ledger.errors import InvalidArgument
from orbit_console.ledger.models import Credential, Namespace, Permission, TaskState
from orbit_console.ledger.requests import parse_retry, parse_review
from orbit_console.ledger.serializers import (
    attempt_item,
    credential_detail,
    operation_detail,
    operation_item,
    task_detail,
    task_summary,
)
from orbit_console.lib.rfc3339 import TimeFormatError, parse_utc

_TASK_LIST_PARAMS = {
    "state",
    "queue_id",
    "handler",
    "business_key",
    "business_key_prefix",
    "updated_after",
    "updated_before",
    "error",
    "limit",
    "cursor",
    "order",
    "count",
}
MAX_TEXT_FILTER_CHARS = 512
MAX_BUSINESS_KEY_PREFIX_CHARS = 255
MAX_ERROR_FILTER_CHARS = 200
_PAGE_PARAMS = {"limit", "cursor"}


@csrf_exempt
def task_resource(request: HttpRequest, ref: str) -> HttpResponse:
    """``/v1/tasks/{id}`` and the custom methods ``/v1/tasks/{id}:review|:retry``."""
    task_id, colon, verb = ref.partition(":")
    if not colon:
        return get_task(request, task_id=task_id)
    if verb == "review":
        return review_task(request, task_id=task_id)
    if verb == "retry":
        return retry_task(request, task_id=task_id)
    return not_found(request)


@api_endpoint(method="GET", permission=Permission.READ)
def get_task(request: HttpRequest, credential: Credential, *, task_id: str) -> Answer:
    """O1: GetTask."""
    query(request, allowed=set())
    task, successor_id = selectors.task_with_successor(credential, path_id(task_id, "task_id"))
    return 200, task_detail(task, retry_successor_id=successor_id)


@api_endpoint(method="POST", permission=Permission.REVIEW)
def review_task(request: HttpRequest, credential: Credential, *, task_id: str) -> Answer:
    """RV: declare the outcome of a NEEDS_REVIEW task."""
    task_id = path_id(task_id, "task_id")
    key, body = write_request(request)
    receipt = services.task_review(
        credential=credential, task_id=task_id, idempotency_key=key, request=parse_review(body)
    )
    return receipt.status, receipt.data


@api_endpoint(method="POST", permission=Permission.RETRY)
def retry_task(request: HttpRequest, credential: Credential, *, task_id: str) -> Answer:
    """RT: create the direct retry successor of a FAILED or CANCELLED task."""
    task_id = path_id(task_id, "task_id")
    key, body = write_request(request)
    receipt = services.task_retry(
        credential=credential, task_id=task_id, idempotency_key=key, request=parse_retry(body)
    )
    return receipt.status, receipt.data


@api_endpoint(method="GET", permission=Permission.AUDIT_READ)
def list_operations(request: HttpRequest, credential: Credential, *, task_id: str) -> Answer:
    """AU2-AU4."""
    task_id = path_id(task_id, "task_id")
    params = query(request, allowed=_PAGE_PARAMS)
    limit = limit_param(params)
    cursor = cursor_param(params, max_chars=selectors.MAX_CURSOR_CHARS)
    task = selectors.task_in_scope(credential, task_id)
    records, next_cursor = selectors.operations_page(task, limit=limit, cursor=cursor)
    return 200, _page([operation_item(record) for record in records], next_cursor)


@api_endpoint(method="GET", permission=Permission.AUDIT_READ)
def get_operation(
    request: HttpRequest, credential: Credential, *, task_id: str, audit_id: str
) -> Answer:
    """AU5."""
    task_id = path_id(task_id, "task_id")
    audit_id = path_id(audit_id, "audit_id")
    query(request, allowed=set())
    task = selectors.task_in_scope(credential, task_id)
    return 200, operation_detail(selectors.operation_of_task(task, audit_id))


@api_endpoint(method="GET", permission=Permission.READ)
def get_credential(request: HttpRequest, credential: Credential) -> Answer:
    """Our choice (docs/api.md): the presented token's own credential — its namespace, queues
    and permissions — so that a console storing a token issued elsewhere learns its scope."""
    query(request, allowed=set())
    name = Namespace.objects.values_list("name", flat=True).get(id=credential.namespace_id)
    return 200, credential_detail(credential, queue_scope(credential), name)


@api_endpoint(method="GET", permission=Permission.READ)
def list_tasks(request: HttpRequest, credential: Credential) -> Answer:
    """Our choice (docs/api.md): the task summary list, without ``retry_of`` (RT9)."""
    params = query(request, allowed=_TASK_LIST_PARAMS)
    filters = selectors.TaskFilters(
        states=_states(params.get("state")),
        queue_id=path_id(params["queue_id"], "queue_id") if "queue_id" in params else None,
        handler=_text_filter(params, "handler"),
        business_key=_text_filter(params, "business_key"),
        business_key_prefix=_pattern_filter(
            params, "business_key_prefix", maximum=MAX_BUSINESS_KEY_PREFIX_CHARS
        ),
        updated_after=_time_filter(params, "updated_after"),
        updated_before=_time_filter(params, "updated_before"),
        error=_pattern_filter(params, "error", maximum=MAX_ERROR_FILTER_CHARS),
        order=_order(params.get("order")),
    )
    if filters.business_key is not None and filters.business_key_prefix is not None:
        raise InvalidArgument(
            "business_key_prefix: cannot be combined with business_key",
            field="business_key_prefix",
        )
    after, before = filters.updated_after, filters.updated_before
    if after is not None and before is not None and after >= before:
        raise InvalidArgument(
            "updated_after: must be earlier than updated_before", field="updated_after"
        )
    limit = limit_param(params)
    cursor = cursor_param(params, max_chars=selectors.MAX_CURSOR_CHARS)
    count = params.get("count")
    if count not in (None, "true", "false"):
        raise InvalidArgument("count: must be true or false", field="count")
    page = selectors.tasks_page(
        credential, filters, limit=limit, cursor=cursor, count=count == "true"
    )
    answer = _page([task_summary(task) for task in page.tasks], page.next_cursor)
    if page.prev_cursor is not None:
        answer["prev_cursor"] = page.prev_cursor
    if page.total is not None:
        answer["total"] = page.total
        answer["total_exact"] = page.total_exact
    return 200, answer


def _order(value: str | None) -> str:
    if value is None:
        return selectors.DEFAULT_TASK_ORDER
    if value not in selectors.TASK_ORDERS:
        raise InvalidArgument(
            f"order: must be one of {', '.join(selectors.TASK_ORDERS)}", field="order"
        )
    return value


@api_endpoint(method="GET", permission=Permission.READ)
def list_attempts(request: HttpRequest, credential: Credential, *, task_id: str) -> Answer:
    """Our choice (docs/api.md): a task's executions, newest first, with late reports."""
    task_id = path_id(task_id, "task_id")
    params = query(request, allowed=_PAGE_PARAMS)
    limit = limit_param(params)
    cursor = cursor_param(params, max_chars=selectors.MAX_CURSOR_CHARS)
    task = selectors.task_in_scope(credential, task_id)
    attempts, next_cursor = selectors.attempts_page(task, limit=limit, cursor=cursor)
    return 200, _page([attempt_item(a, reports) for a, reports in attempts], next_cursor)


def _page(items: list[dict[str, Any]], next_cursor: str | None) -> dict[str, Any]:
    page: dict[str, Any] = {"items": items}
    if next_cursor is not None:
        page["next_cursor"] = next_cursor
    return page


def _states(value: str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    states = tuple(value.split(","))
    if not all(state in TaskState.values for state in states):
        raise InvalidArgument(
            f"state: must be a comma-separated list of {', '.join(TaskState.values)}", field="state"
        )
    return states


def _text_filter(
    params: dict[str, str], name: str, *, maximum: int = MAX_TEXT_FILTER_CHARS
) -> str | None:
    value = params.get(name)
    if value is not None and not 1 <= len(value) <= maximum:
        raise InvalidArgument(f"{name}: must be 1 to {maximum} characters", field=name)
    return value


def _pattern_filter(params: dict[str, str], name: str, *, maximum: int) -> str | None:
    """A text matched with LIKE. NUL is refused: SQLite ends a LIKE pattern at it, so
    ``error=%00`` would match every attempt there and none on MariaDB."""
    value = _text_filter(params, name, maximum=maximum)
    if value is not None and "\x00" in value:
        raise InvalidArgument(f"{name}: must not contain the NUL character", field=name)
    return value


def _time_filter(params: dict[str, str], name: str) -> datetime | None:
    value = params.get(name)
    if value is None:
        return None
    try:
        return parse_utc(value)
    except TimeFormatError as exc:
        raise InvalidArgument(f"{name}: {exc}", field=name) from None
