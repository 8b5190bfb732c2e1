"""Append-only tables, enforced by the database itself.

``append_only(table)`` gives a migration operation that creates triggers refusing every UPDATE
and DELETE on ``table``: on SQLite ``RAISE(ABORT, ...)``, on MySQL/MariaDB ``SIGNAL SQLSTATE
'45000'`` — an error, never a silent skip. Only a person with the right to drop triggers can
change such rows, and the hash chains show that they did (``manage.py audit verify``).
"""

from collections.abc import Callable

from django.db import migrations
from django.db.backends.base.schema import BaseDatabaseSchemaEditor
from django.db.migrations.state import StateApps


def _statements(vendor: str, table: str) -> list[str]:
    statements = []
    for operation in ("UPDATE", "DELETE"):
        name = f"{table}_no_{operation.lower()}"
        message = f"{table} is append-only: {operation} refused"
        if vendor == "sqlite":
            statements.append(
                f"CREATE TRIGGER {name} BEFORE {operation} ON {table} "
                f"BEGIN SELECT RAISE(ABORT, '{message}'); END"
            )
        elif vendor == "mysql":
            statements.append(
                f"CREATE TRIGGER {name} BEFORE {operation} ON {table} FOR EACH ROW "
                f"SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = '{message}'"
            )
        else:
            raise NotImplementedError(f"append-only triggers for {vendor}")
    return statements


def drop_statements(table: str) -> list[str]:
    return [f"DROP TRIGGER IF EXISTS {table}_no_{operation}" for operation in ("update", "delete")]


def create_statements(vendor: str, table: str) -> list[str]:
    return _statements(vendor, table)


def append_only(table: str) -> migrations.RunPython:
    create, drop = _triggers(table)
    return migrations.RunPython(create, drop, atomic=False, elidable=False)


def lift_append_only(table: str) -> migrations.RunPython:
    """The inverse of ``append_only``: for a migration that must alter the table (adding a
    column can rebuild it), between this and a new ``append_only``."""
    create, drop = _triggers(table)
    return migrations.RunPython(drop, create, atomic=False, elidable=False)


type _Step = Callable[[StateApps, BaseDatabaseSchemaEditor], None]


def _triggers(table: str) -> tuple[_Step, _Step]:
    def create(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        for statement in create_statements(schema_editor.connection.vendor, table):
            schema_editor.execute(statement)

    def drop(apps: StateApps, schema_editor: BaseDatabaseSchemaEditor) -> None:
        for statement in drop_statements(table):
            schema_editor.execute(statement)

    return create, drop
