"""Plain-SQL reads and writes of one model's rows, for the few paths where the ORM's cost shows.

Building a query through the ORM costs about half a millisecond of CPU on a small server
(compiling the ``WHERE``, cloning querysets, ``save()``'s signals and bookkeeping), several
times what the database needs to answer it; a review or a task read pays it a dozen times
(docs/performance.md). ``Rows`` keeps what the ORM would do with the result — Django's own
converters on every column read, each field's ``get_db_prep_save`` on every value written, model
instances in and out — and drops the rest: the SQL text is built once per model and database
vendor, and every call is one ``cursor.execute``.

The conditions are written by the caller as SQL with ``%s`` placeholders over column names::

    TASKS = Rows(Task)
    task = TASKS.one("id = %s AND namespace_id = %s", [task_id, namespace_id], for_update=True)
    TASKS.update(task, ["state", "revision"])
    AUDIT.insert(record)

``for_update`` becomes ``FOR UPDATE`` where the database has it; SQLite has none and needs none
(its IMMEDIATE transactions hold the write lock from ``BEGIN``).
"""

from collections.abc import Callable, Iterable, Sequence
from functools import cached_property
from typing import Any

from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import Field, Model

Converter = Callable[[Any, Any, BaseDatabaseWrapper], Any]


class Rows[M: Model]:
    def __init__(self, model: type[M], *, using: str = "default") -> None:
        self.model = model
        self.using = using
        self._per_vendor: dict[str, _Statements] = {}

    @property
    def connection(self) -> BaseDatabaseWrapper:
        return connections[self.using]

    @property
    def table(self) -> str:
        """The model's table, quoted, for a query of the caller's own."""
        return self.connection.ops.quote_name(self.model._meta.db_table)

    @cached_property
    def fields(self) -> tuple[Field, ...]:
        return tuple(self.model._meta.concrete_fields)  # type: ignore[arg-type]

    @cached_property
    def _by_name(self) -> dict[str, Field]:
        return {field.name: field for field in self.fields}

    @cached_property
    def attnames(self) -> list[str]:
        return [field.attname for field in self.fields]

    def _statements(self) -> "_Statements":
        connection = self.connection
        statements = self._per_vendor.get(connection.vendor)
        if statements is None:
            statements = self._per_vendor[connection.vendor] = _Statements(self, connection)
        return statements

    # --- Reading --------------------------------------------------------------------------------

    def one(
        self,
        where: str,
        params: Sequence[Any],
        *,
        order_by: str = "",
        for_update: bool = False,
    ) -> M | None:
        """The first row matching ``where``, as a model instance, or ``None``."""
        found = self.many(where, params, order_by=order_by, limit=1, for_update=for_update)
        return found[0] if found else None

    def many(
        self,
        where: str,
        params: Sequence[Any],
        *,
        order_by: str = "",
        limit: int | None = None,
        for_update: bool = False,
    ) -> list[M]:
        """The rows matching ``where``, as model instances."""
        statements = self._statements()
        connection = self.connection
        sql = f"{statements.select} WHERE {where}"
        if order_by:
            sql += f" ORDER BY {order_by}"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        if for_update and connection.features.has_select_for_update:
            sql += " FOR UPDATE"
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall()
        return [self.from_row(row, statements) for row in rows]

    def from_row(self, row: Sequence[Any], statements: "_Statements | None" = None) -> M:
        """A model instance from a row of ``select_columns`` (as Django would read it)."""
        statements = statements or self._statements()
        values = list(row)
        connection = self.connection
        for index, converters, column in statements.converters:
            value = values[index]
            for convert in converters:
                value = convert(value, column, connection)
            values[index] = value
        return self.model.from_db(self.using, self.attnames, values)

    def select_columns(self, alias: str = "") -> str:
        """The model's columns, quoted, for a query of the caller's own (``from_row`` reads it)."""
        quote = self.connection.ops.quote_name
        prefix = f"{quote(alias)}." if alias else ""
        return ", ".join(prefix + quote(_column(field)) for field in self.fields)

    # --- Writing --------------------------------------------------------------------------------

    def insert(self, instance: M) -> None:
        """``INSERT`` every concrete field of ``instance``; an auto-increment key is the
        database's, and is set on ``instance`` from the insert (both drivers report it)."""
        statements = self._statements()
        connection = self.connection
        values = [
            field.get_db_prep_save(getattr(instance, field.attname), connection)
            for field in statements.insert_fields
        ]
        with connection.cursor() as cursor:
            cursor.execute(statements.insert, values)
            if statements.auto_key is not None:
                setattr(instance, statements.auto_key, cursor.lastrowid)
        instance._state.adding = False
        instance._state.db = self.using

    def update(self, instance: M, fields: Iterable[str]) -> int:
        """``UPDATE`` the named fields of ``instance``'s row; the number of rows changed."""
        connection = self.connection
        quote = connection.ops.quote_name
        by_name = self._by_name
        assignments, values = [], []
        for name in fields:
            field = by_name[name]
            assignments.append(f"{quote(_column(field))} = %s")
            values.append(field.get_db_prep_save(getattr(instance, field.attname), connection))
        values.append(instance.pk)
        key = quote(_column(self.model._meta.pk))
        sql = f"UPDATE {self.table} SET {', '.join(assignments)} WHERE {key} = %s"  # noqa: S608 -- the model's own names
        with connection.cursor() as cursor:
            cursor.execute(sql, values)
            return int(cursor.rowcount)


class _Statements:
    """One model's SQL and converters on one database vendor."""

    def __init__(self, rows: Rows[Any], connection: BaseDatabaseWrapper) -> None:
        quote = connection.ops.quote_name
        meta = rows.model._meta
        table = quote(meta.db_table)
        self.select = f"SELECT {rows.select_columns()} FROM {table}"  # noqa: S608 -- the model's own names
        self.converters: list[tuple[int, list[Converter], Any]] = []
        for index, field in enumerate(rows.fields):
            column = field.get_col(meta.db_table)
            converters = connection.ops.get_db_converters(column) + field.get_db_converters(
                connection
            )
            if converters:
                self.converters.append((index, converters, column))
        # An auto-increment key is the database's to give.
        self.insert_fields = [
            field for field in rows.fields if not getattr(field, "db_returning", False)
        ]
        self.auto_key = next(
            (field.attname for field in rows.fields if getattr(field, "db_returning", False)), None
        )
        columns = ", ".join(quote(_column(field)) for field in self.insert_fields)
        marks = ", ".join(["%s"] * len(self.insert_fields))
        self.insert = f"INSERT INTO {table} ({columns}) VALUES ({marks})"  # noqa: S608 -- the model's own names


def _column(field: Field) -> str:
    """A concrete field's column (typed optional only for fields without one)."""
    assert field.column is not None  # noqa: S101 -- concrete fields have columns
    return field.column
