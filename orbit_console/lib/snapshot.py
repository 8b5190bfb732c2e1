"""Reads that see the database at one moment.

Query after query, each read sees what was committed when it ran: a row committed between two
of them is seen by the second and not by the first. Inside ``one_moment()`` every read sees
the database as it was at the first one, whatever commits meanwhile, and writers are not held
up: MariaDB/MySQL run the block as one REPEATABLE READ transaction (this project's connections
are READ COMMITTED otherwise, settings.py), SQLite as one deferred transaction (in WAL mode a
reader keeps its snapshot while writers commit). The block only reads.

The audit checkpoints read the chains' marks and heads this way (``audit/checkpoints.py``), so
that a checkpoint describes one moment of the history: what it signed was written before that
moment, what it did not sign after it (``audit/rewinds.py`` orders records by it).
"""

from collections.abc import Iterator
from contextlib import contextmanager

from django.db import connections, transaction


@contextmanager
def one_moment(using: str = "default") -> Iterator[None]:
    connection = connections[using]
    if connection.in_atomic_block:
        # Its transaction began already, with the isolation it has; a snapshot cannot start
        # inside it.
        raise RuntimeError("one_moment() is its own transaction: not inside atomic()")
    if connection.vendor == "mysql":
        with transaction.atomic(using=using):
            with connection.cursor() as cursor:
                # For the transaction about to start (no statement has started it yet).
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            yield
        return
    # SQLite: Django's transactions begin IMMEDIATE (settings.py), which takes the write lock;
    # a deferred one that only reads takes none. Under autocommit, the driver leaves BEGIN and
    # COMMIT to us.
    with connection.cursor() as cursor:
        cursor.execute("BEGIN DEFERRED")
    try:
        yield
    except BaseException:
        with connection.cursor() as cursor:
            cursor.execute("ROLLBACK")
        raise
    with connection.cursor() as cursor:
        cursor.execute("COMMIT")
