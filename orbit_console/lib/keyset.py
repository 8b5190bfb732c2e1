"""Keyset pagination: reading rows page by page from where the last page ended, so that page
1 000 costs what page 1 costs.

The OR form ``created_at < c OR (created_at = c AND id < i)`` is used throughout: MariaDB
answers it from the index at any depth, where the row-value form ``(created_at, id) < (c, i)``
reads the whole index (docs/api.md, "Pagination and cursors").
"""

from collections.abc import Iterator, Sequence
from datetime import datetime

from django.db.models import Model, Q, QuerySet


def older_than(created_at: datetime, row_id: str) -> Q:
    """Rows after ``(created_at, row_id)`` in newest-first ``(created_at DESC, id DESC)`` order."""
    return Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=row_id)


def ascending[M: Model](rows: QuerySet[M], key: Sequence[str], batch: int = 2000) -> Iterator[M]:
    """Every row of ``rows`` in ascending ``key`` order, read in keyset batches of ``batch``.

    Unlike ``.iterator()``, which streams on SQLite but not on MySQL/MariaDB (whose driver holds
    the whole result set in memory), this keeps one batch in memory on every database."""
    ordered = rows.order_by(*key)
    position = Q()
    while chunk := list(ordered.filter(position)[:batch]):
        yield from chunk
        position = _after(chunk[-1], key)


def _after(row: Model, key: Sequence[str]) -> Q:
    """``a > x OR (a = x AND b > y) OR ...``: the rows after ``row`` in ``key`` order."""
    values = [getattr(row, field) for field in key]
    after = Q()
    for depth, field in enumerate(key):
        equal = dict(zip(key[:depth], values[:depth], strict=True))
        after |= Q(**equal, **{f"{field}__gt": values[depth]})
    return after
