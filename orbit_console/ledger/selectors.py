"""Reads of the ledger, always within a credential's namespace and queue scope (C4).

Lists use keyset pagination in the OR form ``created_at < c OR (created_at = c AND id < i)``,
which MariaDB answers from the index at any depth (the row-value form is a full index read
there). Cursors are signed, opaque, and bound to namespace, subject and query kind (AU3).
"""

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.conf import settings
from django.core import signing
from django.db import connection
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import CharField, F, Func, OuterRef, Q, QuerySet, Subquery, TextField, Value
from django.db.models.functions import Substr
from django.db.models.lookups import Exact, IsNull
from django.db.models.sql.compiler import SQLCompiler

from orbit_console.ledger.auth import queue_scope
from orbit_console.ledger.errors import InvalidArgument, NotFound
from orbit_console.ledger.models import (
    Attempt,
    AttemptReport,
    Credential,
    OperationAudit,
    Task,
)
from orbit_console.ledger.tables import ATTEMPTS, AUDIT, REPORTS, TASKS
from orbit_console.lib.keyset import older_than

MAX_CURSOR_CHARS = 1024  # AU2
_CURSOR_SALT = "orbit.ledger.cursor"


def task_in_scope(credential: Credential, task_id: str, *, for_update: bool = False) -> Task:
    """The task if it exists inside the credential's scope; otherwise 404, whichever it is."""
    task = TASKS.one(
        "id = %s AND namespace_id = %s", [task_id, credential.namespace_id], for_update=for_update
    )
    return _in_scope(credential, task)


def task_with_successor(credential: Credential, task_id: str) -> tuple[Task, str | None]:
    """GetTask's read (O1): the task in the credential's scope and its retry successor's id,
    in one query."""
    sql = (
        f"SELECT {TASKS.select_columns('t')}, "  # noqa: S608 -- the model's own names
        f"(SELECT s.id FROM {TASKS.table} s WHERE s.namespace_id = t.namespace_id "
        "AND s.retry_of = t.id) "
        f"FROM {TASKS.table} t WHERE t.id = %s AND t.namespace_id = %s"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [task_id, credential.namespace_id])
        row = cursor.fetchone()
    task = _in_scope(credential, TASKS.from_row(row[:-1]) if row else None)
    return task, row[-1]


def _in_scope(credential: Credential, task: Task | None) -> Task:
    scope = queue_scope(credential)
    if task is None or (scope is not None and task.queue_id not in scope):
        raise NotFound("no such task")
    return task


def retry_successor_id(task: Task) -> str | None:
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT id FROM {TASKS.table} WHERE namespace_id = %s AND retry_of = %s",  # noqa: S608
            [task.namespace_id, task.id],
        )
        row = cursor.fetchone()
    return row[0] if row else None


# --- Cursors ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CursorBinding:
    """What a cursor belongs to: a cursor of another namespace, subject or kind is refused."""

    kind: str
    namespace_id: str
    subject: str


def encode_cursor(binding: CursorBinding, position: list[Any]) -> str:
    payload = [binding.kind, binding.namespace_id, binding.subject, position]
    return signing.dumps(payload, salt=_CURSOR_SALT, compress=False)


def decode_cursor(binding: CursorBinding, cursor: str) -> list[Any]:
    try:
        kind, namespace_id, subject, position = signing.loads(cursor, salt=_CURSOR_SALT)
    except (signing.BadSignature, ValueError, TypeError):
        raise InvalidArgument(
            "cursor: is not a cursor this server issued", field="cursor"
        ) from None
    if (kind, namespace_id, subject) != (binding.kind, binding.namespace_id, binding.subject):
        raise InvalidArgument("cursor: belongs to another query", field="cursor")
    return list(position)


def _keyset_after(position: list[Any]) -> Q:
    return older_than(datetime.fromisoformat(position[0]), position[1])


def _page(
    rows: QuerySet[Any], binding: CursorBinding, cursor: str | None, limit: int
) -> tuple[list[Any], str | None]:
    if cursor is not None:
        rows = rows.filter(_keyset_after(decode_cursor(binding, cursor)))
    # The page's keys first, then its rows by primary key. Asked for whole rows, MariaDB
    # prefers walking the equality prefix (task or namespace) in index order over the keyset
    # range whenever the range is not selective, and so reads every row before the cursor:
    # a page at depth n cost n rows. The key query is answered from the index alone, where
    # the range always wins (tests/ledger/test_pagination_cost.py).
    keys = list(rows.order_by("-created_at", "-id").values_list("id", flat=True)[: limit + 1])
    by_id = rows.model._default_manager.in_bulk(keys[:limit])
    page = [by_id[key] for key in keys[:limit] if key in by_id]
    if len(keys) <= limit or not page:
        return page, None
    last = page[-1]
    return page, encode_cursor(binding, [last.created_at.isoformat(), last.id])


# --- Lists ------------------------------------------------------------------------------------


def operations_page(
    task: Task, *, limit: int, cursor: str | None
) -> tuple[list[OperationAudit], str | None]:
    """AU2, AU3: a task's audit, newest first."""
    binding = CursorBinding("operations", task.namespace_id, task.id)
    return _page(OperationAudit.objects.filter(task_id=task.id), binding, cursor, limit)


def operation_of_task(task: Task, audit_id: str) -> OperationAudit:
    """AU5: 404 when missing or when it belongs to another task."""
    record = AUDIT.one("id = %s AND task_id = %s", [audit_id, task.id])
    if record is None:
        raise NotFound("no such operation on this task")
    return record


# The task list's orders (docs/api.md "The task list"): by creation or last update, newest or
# oldest first; ties broken by id in the same direction.
TASK_ORDERS = {
    "created_desc": ("created_at", True),
    "created_asc": ("created_at", False),
    "updated_desc": ("updated_at", True),
    "updated_asc": ("updated_at", False),
}
DEFAULT_TASK_ORDER = "created_desc"


@dataclass(frozen=True, slots=True)
class TaskPage:
    """A page of the task list: its tasks, the cursors to the pages after and before it in the
    list's order, and (when asked) how many tasks match, exactly or at least."""

    tasks: list[Task]
    next_cursor: str | None
    prev_cursor: str | None
    total: int | None = None
    total_exact: bool = True


@dataclass(frozen=True, slots=True)
class TaskFilters:
    states: tuple[str, ...] = ()
    queue_id: str | None = None
    handler: str | None = None
    business_key: str | None = None
    business_key_prefix: str | None = None
    updated_after: datetime | None = None
    updated_before: datetime | None = None
    error: str | None = None
    order: str = DEFAULT_TASK_ORDER

    def binding_subject(self) -> str:
        """The filters a cursor is bound to, as JSON: unambiguous whatever the texts hold (a
        separator could be part of a handler or a key), and equal for equal times however
        they were spelt."""

        def time(value: datetime | None) -> str | None:
            return None if value is None else value.astimezone(UTC).isoformat()

        # The default order binds as it always did: a cursor issued before orders existed
        # still reads on.
        ordered = [] if self.order == DEFAULT_TASK_ORDER else [self.order]
        return json.dumps(
            [
                *ordered,
                list(self.states),
                self.queue_id,
                self.handler,
                self.business_key,
                self.business_key_prefix,
                time(self.updated_after),
                time(self.updated_before),
                self.error,
            ],
            ensure_ascii=False,
            separators=(",", ":"),
        )


_ASCII_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_ASCII_FOLD = str.maketrans(_ASCII_UPPER, _ASCII_UPPER.lower())


class _AsciiLower(Func):
    """Text with A-Z lowered and every other character kept, alike on every database. SQL's
    LOWER() is exactly that on SQLite (built without ICU) but folds all of Unicode, by its own
    older tables, on MariaDB; there the letters are replaced one by one. (SQLite gets LOWER():
    its parser refuses the REPLACE calls nested 26 deep once the query around them grows.)"""

    arity = 1
    output_field = TextField()

    def as_sql(
        self,
        compiler: SQLCompiler,
        connection: BaseDatabaseWrapper,
        function: str | None = None,
        template: str | None = None,
        arg_joiner: str | None = None,
        **extra_context: Any,
    ) -> tuple[str, tuple[Any, ...]]:
        sql, params = compiler.compile(self.source_expressions[0])
        for upper in _ASCII_UPPER:
            sql = f"REPLACE({sql}, %s, %s)"
            params = (*params, upper, upper.lower())
        return sql, tuple(params)

    def as_sqlite(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra_context: Any
    ) -> tuple[str, tuple[Any, ...]]:
        sql, params = compiler.compile(self.source_expressions[0])
        return f"LOWER({sql})", tuple(params)


def _business_key_starts_with(prefix: str) -> Q:
    # LIKE is exact on MySQL/MariaDB (Django's LIKE BINARY) and can use the business-key
    # index there; SQLite's LIKE ignores ASCII case, so the head is compared as well. Django
    # escapes %, _ and the escape character in the pattern.
    head = Substr("business_key", 1, len(prefix))
    return Q(business_key__startswith=prefix) & Q(
        Exact(head, Value(prefix, output_field=CharField()))
    )


def _has_attempt_error_containing(text: str) -> Q:
    """Any of the task's attempts has ``text`` in its error, A-Z in either case.

    Asked per task, from the attempts' (task_id, number) index: the scalar subquery's first
    match, not EXISTS. MariaDB turns an EXISTS into a semi-join that reads every attempt of
    every namespace into a temporary table first, for each page; a scalar subquery it
    evaluates for the candidate rows only, as SQLite does either way."""
    match = (
        Attempt.objects.filter(task_id=OuterRef("id"))
        .alias(folded_error=_AsciiLower(F("error")))
        .filter(folded_error__contains=text.translate(_ASCII_FOLD))
        .values("number")[:1]
    )
    return Q(IsNull(Subquery(match), False))


def tasks_page(
    credential: Credential,
    filters: TaskFilters,
    *,
    limit: int,
    cursor: str | None,
    count: bool = False,
) -> TaskPage:
    """The task list of a credential's scope, filtered, in ``filters.order``: the page after
    or before the cursor (a cursor says which way it reads)."""
    tasks = Task.objects.filter(namespace_id=credential.namespace_id)
    scope = queue_scope(credential)
    if scope is not None:
        tasks = tasks.filter(queue_id__in=scope)
    if filters.states:
        tasks = tasks.filter(state__in=filters.states)
    if filters.queue_id:
        tasks = tasks.filter(queue_id=filters.queue_id)
    if filters.handler:
        tasks = tasks.filter(handler=filters.handler)
    if filters.business_key:
        tasks = tasks.filter(business_key=filters.business_key)
    if filters.business_key_prefix:
        tasks = tasks.filter(_business_key_starts_with(filters.business_key_prefix))
    if filters.updated_after is not None:
        tasks = tasks.filter(updated_at__gte=filters.updated_after)
    if filters.updated_before is not None:
        tasks = tasks.filter(updated_at__lt=filters.updated_before)
    if filters.error:
        tasks = tasks.filter(_has_attempt_error_containing(filters.error))
    binding = CursorBinding("tasks", credential.namespace_id, filters.binding_subject())
    page = _keyset_page(tasks, binding, cursor, limit, TASK_ORDERS[filters.order])
    if not count:
        return page
    # SELECT COUNT(*) over at most the cap plus one rows: past the cap, "more than".
    cap = settings.ORBIT_TASK_COUNT_CAP
    counted = tasks.order_by()[: cap + 1].count()
    return TaskPage(
        page.tasks,
        page.next_cursor,
        page.prev_cursor,
        total=min(counted, cap),
        total_exact=counted <= cap,
    )


def _keyset_page(
    rows: QuerySet[Task],
    binding: CursorBinding,
    cursor: str | None,
    limit: int,
    order: tuple[str, bool],
) -> TaskPage:
    """A keyset page both ways. A cursor is ``[way, time, id]``: "next" reads on after the
    row in the list's order, "prev" reads back before it (``[time, id]``, a cursor of before
    orders existed, reads on). Reading back to the list's start gives its first page."""
    field, descending = order

    def beyond(time: datetime, row_id: str, *, forward: bool) -> Q:
        down = descending == forward  # rows with smaller keys
        op = "lt" if down else "gt"
        return Q(**{f"{field}__{op}": time}) | Q(**{field: time, f"id__{op}": row_id})

    def ordered(qs: QuerySet[Task], *, forward: bool) -> QuerySet[Task]:
        down = descending == forward
        return qs.order_by(f"-{field}", "-id") if down else qs.order_by(field, "id")

    def encode(way: str, task: Task) -> str:
        return encode_cursor(binding, [way, getattr(task, field).isoformat(), task.id])

    def read(qs: QuerySet[Task], *, forward: bool) -> tuple[list[Task], bool]:
        # The page's keys first, then its rows by primary key (see ``_page``: MariaDB).
        keys = list(ordered(qs, forward=forward).values_list("id", flat=True)[: limit + 1])
        by_id = Task.objects.in_bulk(keys[:limit])
        return [by_id[key] for key in keys[:limit] if key in by_id], len(keys) > limit

    way = "next"
    if cursor is not None:
        position = decode_cursor(binding, cursor)
        if len(position) == 2:
            position = ["next", *position]
        if len(position) != 3 or position[0] not in ("next", "prev"):
            raise InvalidArgument("cursor: is not a cursor this server issued", field="cursor")
        way, time, row_id = position
        try:
            at = datetime.fromisoformat(time)
        except (TypeError, ValueError):
            raise InvalidArgument(
                "cursor: is not a cursor this server issued", field="cursor"
            ) from None
        if way == "prev":
            before, more = read(rows.filter(beyond(at, row_id, forward=False)), forward=False)
            if more and before:
                before.reverse()
                return TaskPage(before, encode("next", before[-1]), encode("prev", before[0]))
            cursor = None  # back at the start: the first page, whole
        else:
            rows = rows.filter(beyond(at, row_id, forward=True))
    page, more = read(rows, forward=True)
    if not page:
        return TaskPage(page, None, None)
    return TaskPage(
        page,
        encode("next", page[-1]) if more else None,
        encode("prev", page[0]) if cursor is not None else None,
    )


def attempts_page(
    task: Task, *, limit: int, cursor: str | None
) -> tuple[list[tuple[Attempt, list[AttemptReport]]], str | None]:
    """A task's executions, newest first, each with the late reports appended to it."""
    binding = CursorBinding("attempts", task.namespace_id, task.id)
    where, params = "task_id = %s", [task.id]
    if cursor is not None:
        (before_number,) = decode_cursor(binding, cursor)
        where, params = f"{where} AND number < %s", [*params, int(before_number)]
    page = ATTEMPTS.many(where, params, order_by="number DESC", limit=limit + 1)
    next_cursor = None
    if len(page) > limit:
        page = page[:limit]
        next_cursor = encode_cursor(binding, [page[-1].number])
    reports: dict[str, list[AttemptReport]] = {attempt.id: [] for attempt in page}
    if reports:
        marks = ", ".join(["%s"] * len(reports))
        for report in REPORTS.many(
            f"attempt_id IN ({marks})", list(reports), order_by="received_at, id"
        ):
            reports[report.attempt_id].append(report)
    return [(attempt, reports[attempt.id]) for attempt in page], next_cursor
