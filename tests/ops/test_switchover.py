"""The fast subset of the database switchover drill (issue 34; the drill:
``bench/drills/switchover.py``, its procedure: docs/runbooks.md, "Switching the database over to
its replica").

A console whose database is a MariaDB primary with a replica (two ``mariadbd`` of the test's
own, real GTID replication), reached through a TCP proxy that plays the database's host name,
so ``DATABASE_URL`` never changes. An operator decides one task before the switchover; while
the host refuses, they confirm a second and are told that the console cannot reach its database
(503) and nothing is stored; the replica is waited for, the primary stopped, the replica
promoted and the host moved; the operator, still signed in, confirms again from the same page
and the decision is applied once. On the new primary: both decisions, each applied once, each
with its stored submission, and no task decided twice.
"""

import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from tests.console.web import (
    Console,
    review_values,
    submission_id_of,
    text_of,
    wizard_submit,
    wizard_to_confirm,
)
from tests.support.mariadb_pair import Server, pair, promote, replica_caught_up
from tests.support.mysql import require_mysql_driver
from tests.support.people import TestPerson
from tests.support.proxy import TcpProxy
from tests.support.servers import DaphneServer, child_env, free_port, run_manage
from tests.support.tools import tool

# mariadbd and the MySQL driver are system extras a fresh machine lacks.
pytestmark = pytest.mark.system_extra

DATABASE = "switchover"
TABLES = {"console_submission", "ledger_operationaudit"}  # what count() may look at


@dataclass
class Pair:
    primary: Server
    replica: Server
    host: TcpProxy  # the database's host name: the primary's, then the promoted replica's

    @property
    def url(self) -> str:
        return f"mysql://root@127.0.0.1:{self.host.port}/{DATABASE}"

    def switch_over(self) -> bool:
        """The planned switchover of the runbook, the host already refusing: wait for the
        replica to apply the primary's last transaction, stop the primary, promote the replica,
        point the host at it. Whether the replica had caught up."""
        rows = self.primary.sql("SELECT @@gtid_binlog_pos", socket=True)
        assert rows, "the primary does not answer"
        caught_up = replica_caught_up(str(rows[0][0]), self.replica, 60)
        self.primary.stop()
        promote(self.replica)
        self.host.upstream = ("127.0.0.1", self.replica.port)
        self.host.set_mode("pass")
        return caught_up

    def count(self, table: str, task_id: str, **where: str) -> int:
        """Rows of ``table`` for ``task_id`` (and the ``where`` columns' values) on the database
        behind the host now: the test's own look, beside the console."""
        assert table in TABLES and set(where) <= {"action", "state"}, (table, where)
        server = self.replica if self.host.upstream[1] == self.replica.port else self.primary
        conditions = "".join(f" AND {column} = %s" for column in where)
        rows = server.sql(
            f"SELECT COUNT(*) FROM {DATABASE}.{table} WHERE task_id = %s{conditions}",  # noqa: S608
            (task_id, *where.values()),
            socket=True,
        )
        assert rows is not None, f"{server.name} does not answer"
        return int(rows[0][0])


@pytest.fixture
def database_pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Pair]:
    tool("mariadbd")
    require_mysql_driver()
    base = Path(tmp_path_factory.mktemp("pair"))
    primary, replica = pair(base, free_port(), free_port(), durable=False)
    host = TcpProxy(("127.0.0.1", primary.port))
    try:
        primary.sql(
            f"CREATE DATABASE {DATABASE} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", socket=True
        )
        yield Pair(primary, replica, host)
    finally:
        host.close()
        primary.stop()
        replica.stop()
        shutil.rmtree(base, ignore_errors=True)


def manage(database_url: str, *args: str) -> str:
    done = run_manage(*args, env=child_env(DATABASE_URL=database_url))
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_switchover_to_the_replica_loses_no_decision_and_applies_none_twice(
    database_pair: Pair, tmp_path: Path
) -> None:
    url = database_pair.url
    manage(url, "migrate", "--verbosity", "0")
    seeded = json.loads(manage(url, "orbit", "seed"))
    password = tmp_path / "password"
    password.write_text("switchover-drill-password")
    manage(
        url, "console", "user", "sam", "--role", "operator",
        "--namespace", seeded["namespace_id"], "--password-file", str(password),
    )  # fmt: skip
    operator = TestPerson(
        "sam", password.read_text(), User(username="sam"), frozenset({"operator"})
    )
    before, during = seeded["tasks"]["needs_review"], seeded["tasks"]["needs_review_2"]
    server = DaphneServer(
        "switchover",
        env={"DATABASE_URL": url, "CONSOLE_REVIEW_APPROVAL": "off"},
    )
    try:
        server.start()
        with Console(server.url) as console:
            console.sign_in(operator)
            confirm = wizard_to_confirm(console, before, "review", review_values())
            first = submission_id_of(wizard_submit(console, before, "review", confirm.text))
            confirm = wizard_to_confirm(console, during, "review", review_values())

            # The host refuses and drops every connection it holds: a failover begins.
            database_pair.host.set_mode("refuse")
            database_pair.host.cut()
            refused = wizard_submit(console, during, "review", confirm.text)
            assert refused.status_code == 503, text_of(refused.text)
            assert "cannot reach a service it needs (its database)" in text_of(refused.text)
            assert "stored-before-fault" not in refused.text

            assert database_pair.switch_over(), "the replica had not applied the primary's last"
            assert database_pair.count("console_submission", during) == 0

            # Still signed in (the session was the primary's and is the replica's), the same
            # page sent again: stored and applied, once.
            second = submission_id_of(wizard_submit(console, during, "review", confirm.text))
            page = console.get(f"/submissions/{first}")
            assert page.status_code == 200, text_of(page.text)
    finally:
        server.stop()
    assert second != first
    for task_id in (before, during):
        reviews = database_pair.count("ledger_operationaudit", task_id, action="task.review")
        assert reviews == 1, f"{task_id} reviewed {reviews} times"
        applied = database_pair.count("console_submission", task_id, state="succeeded")
        assert applied == 1, f"{task_id}: {applied} applied submissions"
