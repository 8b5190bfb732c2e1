"""Keyset pagination over ``(created_at DESC, id DESC)``.

The OR form ``created_at < c OR (created_at = c AND id < i)``: MariaDB answers it from the
index at any depth, where the row-value form ``(created_at, id) < (c, i)`` reads the whole
index (docs/api.md, "Pagination and cursors").
"""

from datetime import datetime

from django.db.models import Q


def older_than(created_at: datetime, row_id: str) -> Q:
    """Rows after ``(created_at, row_id)`` in newest-first order."""
    return Q(created_at__lt=created_at) | Q(created_at=created_at, id__lt=row_id)
