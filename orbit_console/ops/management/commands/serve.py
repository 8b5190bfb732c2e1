"""``manage.py serve [--bind HOST:PORT] [--workers N] [--server uvicorn|daphne] [--proxy-headers]``:
one replica's whole serving shape — HTTP and WebSockets on one address, served by N worker
processes of an ASGI server (uvicorn unless ``ORBIT_SERVER`` or ``--server`` says daphne;
ops/workers.py says why).

Each worker gets its own listening socket on the same address (``SO_REUSEPORT``), so the
kernel spreads new connections over the workers and every core serves. The supervisor keeps
the sockets, so a worker that dies is started again on the same socket and no connection
waiting in its queue is refused (ops/supervisor.py).

Several workers need a channel layer they share (``REDIS_URL``): the in-memory layer of the
embedded default lives in one process, so without Redis the default is one worker and more
are refused. The default with Redis is one worker per core (``ORBIT_WORKERS`` overrides it).
"""

import socket
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from orbit_console.ops.supervisor import Child, Supervisor
from orbit_console.ops.workers import (
    SERVERS,
    default_server,
    default_workers,
    shares_channel_layer,
    worker_argv,
)


def parse_bind(bind: str) -> tuple[str, int]:
    host, sep, port = bind.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise CommandError(f"--bind takes HOST:PORT, not {bind!r}")
    return host.strip("[]"), int(port)


def listening_sockets(host: str, port: int, count: int) -> list[socket.socket]:
    """``count`` sockets listening on one address; with port 0, on the port the first got."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sockets: list[socket.socket] = []
    for _ in range(count):
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.bind((host, port))
        sock.listen(1024)
        sock.set_inheritable(True)
        port = sock.getsockname()[1]
        sockets.append(sock)
    return sockets


class Command(BaseCommand):
    help = "Serve HTTP and WebSockets on one address with N worker processes."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--bind", default="127.0.0.1:8000", help="HOST:PORT")
        parser.add_argument(
            "--workers",
            type=int,
            default=None,
            help="worker processes (default: ORBIT_WORKERS, else one per core with REDIS_URL, "
            "else 1)",
        )
        parser.add_argument(
            "--server",
            choices=SERVERS,
            default=None,
            help="the ASGI server of each worker (default: ORBIT_SERVER, else uvicorn)",
        )
        parser.add_argument(
            "--proxy-headers",
            action="store_true",
            help="take the client address from X-Forwarded-For (behind the proxy)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        host, port = parse_bind(options["bind"])
        workers = options["workers"] or default_workers()
        if workers < 1:
            raise CommandError("--workers must be at least 1")
        if workers > 1 and not shares_channel_layer():
            raise CommandError(
                f"{workers} workers need a channel layer they share: set REDIS_URL "
                "(the in-memory layer serves one process)"
            )
        sockets = listening_sockets(host, port, workers)
        port = sockets[0].getsockname()[1]
        server = options["server"] or default_server()
        children = [
            Child(
                name=f"web-{index}",
                argv=worker_argv(server, fd=sock.fileno(), proxy_headers=options["proxy_headers"]),
                pass_fds=(sock.fileno(),),
            )
            for index, sock in enumerate(sockets)
        ]
        shown = f"[{host}]" if ":" in host else host
        self.stdout.write(f"Serving on http://{shown}:{port} with {workers} {server} worker(s).")
        self.stdout.flush()
        try:
            Supervisor(children, cwd=settings.BASE_DIR).run()
        finally:
            for sock in sockets:
                sock.close()
