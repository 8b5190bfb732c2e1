"""Two ``mariadbd`` of our own on this machine, for the database switchover (issue 34): a
primary with its binary log and a replica that replicates it (GTID), each with its own
``--datadir``, ``--tmpdir``, ``--port``, ``--socket`` and ``--server-id`` under a base
directory (the drill's ``var/bench/drill-switchover/``, the suite's a temporary one). Root is
reached over TCP from 127.0.0.1 without a password (a throwaway pair, bound to 127.0.0.1
only).

Used by the drill (``bench/drills/switchover.py``) and by its fast subset in the suite
(``tests/ops/test_switchover.py``), which asks for a pair that does not flush to disk at every
commit (``durable=False``): a planned switchover waits for the replica by GTID, so nothing it
checks depends on what a crash of this machine would keep."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.threads import at_once


@dataclass
class Server:
    name: str
    base: Path
    port: int
    server_id: int
    primary: bool
    durable: bool = True
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    @property
    def datadir(self) -> Path:
        return self.base / self.name / "data"

    @property
    def tmpdir(self) -> Path:
        """Its own: a starting mariadbd removes the temporary table files it finds in its
        tmpdir, those of other servers sharing the directory included (two installs at once in
        /tmp failed often: "Could not remove temporary table … Unknown table
        'mysql.tmp_proxies_priv'"), and this machine's own server keeps its temporary tables
        in /tmp."""
        return self.base / self.name / "tmp"

    @property
    def socket(self) -> Path:
        return self.base / self.name / "mariadb.sock"

    def install(self) -> None:
        shutil.rmtree(self.base / self.name, ignore_errors=True)
        self.datadir.mkdir(parents=True)
        self.tmpdir.mkdir()
        done = subprocess.run(
            ["mariadb-install-db", "--no-defaults", f"--datadir={self.datadir}",
             f"--tmpdir={self.tmpdir}", "--user=root",
             "--auth-root-authentication-method=normal", "--skip-test-db"],
            check=False, capture_output=True, text=True,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"{self.name}: mariadb-install-db: {done.stdout}{done.stderr}")

    def start(self) -> None:
        args = [
            "mariadbd", "--no-defaults", "--user=root", f"--datadir={self.datadir}",
            f"--tmpdir={self.tmpdir}",
            f"--port={self.port}", f"--socket={self.socket}", "--bind-address=127.0.0.1",
            f"--server-id={self.server_id}", f"--pid-file={self.base / self.name / 'pid'}",
            f"--log-error={self.base / self.name / 'error.log'}", "--skip-name-resolve",
            "--innodb-buffer-pool-size=64M",
            f"--innodb-flush-log-at-trx-commit={1 if self.durable else 2}",
            "--log-bin=binlog", "--binlog-format=ROW", "--log-slave-updates=1",
            f"--sync-binlog={1 if self.durable else 0}", "--gtid-strict-mode=1",
            "--character-set-server=utf8mb4", "--collation-server=utf8mb4_bin",
        ]  # fmt: skip
        self.process = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"{self.name}: mariadbd exited; see its error.log")
            if self.socket.exists() and self.sql("SELECT 1", socket=True) is not None:
                return
            time.sleep(0.3)
        raise SystemExit(f"{self.name}: mariadbd did not answer within 60 s")

    def sql(
        self, statement: str, args: tuple[Any, ...] | None = None, *, socket: bool = False
    ) -> list[tuple[Any, ...]] | None:
        """Run ``statement`` (with ``args`` for its ``%s``) as root; its rows (None if the
        server does not answer)."""
        import MySQLdb

        options: dict[str, Any] = {"host": "127.0.0.1", "port": self.port}
        if socket:
            options = {"unix_socket": str(self.socket)}
        try:
            connection = MySQLdb.connect(user="root", password="", **options)
        except MySQLdb.OperationalError:
            return None
        try:
            cursor = connection.cursor()
            cursor.execute(statement, args)
            rows = list(cursor.fetchall()) if cursor.description else []
            connection.commit()
            return rows
        finally:
            connection.close()

    def kill(self) -> None:
        """A crash: SIGKILL, no shutdown."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), waited for."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def pair(
    base: Path, primary_port: int, replica_port: int, *, durable: bool = True
) -> tuple[Server, Server]:
    """Install and start the primary and the replica, replicating (GTID, from the start)."""
    base = base.resolve()
    primary = Server("primary", base, primary_port, 1, True, durable)
    replica = Server("replica", base, replica_port, 2, False, durable)
    at_once(Server.install, [primary, replica])
    try:
        at_once(Server.start, [primary, replica])
        _replicate(primary, replica)
    except BaseException:
        primary.stop()
        replica.stop()
        raise
    return primary, replica


def _replicate(primary: Server, replica: Server) -> None:
    # Root over TCP (root@127.0.0.1) is made by mariadb-install-db on both; the replication
    # user only on the primary, its statements then left out of the binary log the replica reads.
    primary.sql("CREATE USER 'repl'@'127.0.0.1' IDENTIFIED BY 'repl'", socket=True)
    primary.sql("GRANT REPLICATION SLAVE ON *.* TO 'repl'@'127.0.0.1'", socket=True)
    primary.sql("RESET MASTER", socket=True)  # the users above exist on both already
    replica.sql(
        f"CHANGE MASTER TO MASTER_HOST='127.0.0.1', MASTER_PORT={primary.port}, "
        "MASTER_USER='repl', MASTER_PASSWORD='repl', MASTER_USE_GTID=slave_pos",
        socket=True,
    )
    replica.sql("SET GLOBAL gtid_slave_pos = ''", socket=True)
    replica.sql("START SLAVE", socket=True)
    replica.sql("SET GLOBAL read_only = 1", socket=True)


def replica_caught_up(primary_gtid: str, replica: Server, timeout: float) -> bool:
    """Whether the replica applied everything up to ``primary_gtid`` within ``timeout``."""
    rows = replica.sql("SELECT MASTER_GTID_WAIT(%s, %s)", (primary_gtid, timeout), socket=True)
    return bool(rows) and rows[0][0] == 0


def promote(replica: Server) -> None:
    """The replica becomes a primary: replication stopped and forgotten, writes allowed."""
    replica.sql("STOP SLAVE", socket=True)
    replica.sql("RESET SLAVE ALL", socket=True)
    replica.sql("SET GLOBAL read_only = 0", socket=True)


def relay_applied(replica: Server, timeout: float) -> str:
    """Wait until the replica applied everything it received (its SQL thread reached its IO
    thread's position: the primary is gone, nothing more will come); its GTID position."""
    deadline = time.monotonic() + timeout
    while True:
        received, applied = str(_status(replica).get("Gtid_IO_Pos", "")), _applied(replica)
        if received == applied or time.monotonic() > deadline:
            return applied
        time.sleep(0.2)


def _applied(replica: Server) -> str:
    rows = replica.sql("SELECT @@gtid_slave_pos", socket=True)
    return str(rows[0][0]) if rows else ""


def _status(replica: Server) -> dict[str, Any]:
    import MySQLdb
    import MySQLdb.cursors

    connection = MySQLdb.connect(
        user="root", password="", unix_socket=str(replica.socket),
        cursorclass=MySQLdb.cursors.DictCursor,
    )  # fmt: skip
    try:
        cursor = connection.cursor()
        cursor.execute("SHOW SLAVE STATUS")
        row = cursor.fetchone()
        return dict(row) if row else {}
    finally:
        connection.close()
