"""Database connections that follow the database's privileges.

MySQL/MariaDB read a connection's database-level privileges when it opens (and on ``USE``):
a connection opened while the application's grants were taken away keeps failing with "command
denied" after they are given back, for as long as Django keeps it (``CONN_MAX_AGE``, five
minutes). So a connection that meets a privilege error is retired at the end of its request (or
of the loop's round): the next one is opened with the privileges the database has then. Found
by the fault suite (``bench/faults.py``, scenario ``db_grants_revoked``).
"""

import time
from collections.abc import Callable
from typing import Any

from django.db import DatabaseError
from django.db.backends.base.base import BaseDatabaseWrapper

# Access denied to the database (1044), a table (1142), a column (1143), an operation (1227).
PRIVILEGE_ERRORS = frozenset({1044, 1142, 1143, 1227})


def retire_on_privilege_errors(
    execute: Callable[..., Any], sql: str, params: Any, many: bool, context: dict[str, Any]
) -> Any:
    try:
        return execute(sql, params, many, context)
    except DatabaseError as error:
        if error.args and error.args[0] in PRIVILEGE_ERRORS:
            # Django closes a connection past ``close_at`` when the request (or round) ends.
            context["connection"].close_at = time.monotonic()
        raise


def watch_privileges(sender: Any, connection: BaseDatabaseWrapper, **kwargs: Any) -> None:
    """``connection_created``: MySQL/MariaDB connections retire on a privilege error."""
    if (
        connection.vendor == "mysql"
        and retire_on_privilege_errors not in connection.execute_wrappers
    ):
        connection.execute_wrappers.append(retire_on_privilege_errors)
