"""One uvicorn worker of ``manage.py serve``: ``python -m orbit_console.ops.uvicorn_worker``.

    python -m orbit_console.ops.uvicorn_worker (--fd N | --host H --port P) [--proxy-headers]
        [--application module:attribute]

uvicorn on uvloop, with httptools' HTTP parser and the ``websockets`` package (its sans-I/O
protocol) for WebSockets, serving ``orbit_console.asgi:application``. Run through uvicorn's
Python API rather than its command line for one reason: ``uvicorn --fd`` takes every inherited
socket for a Unix socket, so a TCP socket handed over by the supervisor loses ``TCP_NODELAY``
and every small answer waits for the peer's delayed acknowledgement (40 ms here). Here the
socket is taken as what it is.

Django's handler knows no lifespan events; the access log is our own middleware's
(``ops/middleware.AccessLogMiddleware``); uvicorn's own ``Server`` header is not sent.
"""

import argparse
import socket
from collections.abc import Sequence

import uvicorn

APPLICATION = "orbit_console.asgi:application"
GRACEFUL_SHUTDOWN_SECONDS = 5


def config(
    *,
    proxy_headers: bool,
    host: str = "127.0.0.1",
    port: int = 8000,
    application: str = APPLICATION,
) -> uvicorn.Config:
    return uvicorn.Config(
        application,
        host=host,
        port=port,
        loop="uvloop",
        http="httptools",
        ws="websockets-sansio",
        lifespan="off",
        access_log=False,
        log_level="warning",
        server_header=False,
        # Behind the reverse proxy, which alone reaches a replica: its X-Forwarded-For names the
        # client. Without it, none is believed.
        proxy_headers=proxy_headers,
        forwarded_allow_ips="*" if proxy_headers else None,
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_SECONDS,
    )


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fd", type=int, help="an inherited listening socket")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--proxy-headers", action="store_true")
    parser.add_argument("--application", default=APPLICATION, help="module:attribute")
    args = parser.parse_args(argv)
    server = uvicorn.Server(
        config(
            proxy_headers=args.proxy_headers,
            host=args.host,
            port=args.port,
            application=args.application,
        )
    )
    if args.fd is None:
        server.run()
        return
    server.run(sockets=[inherited_socket(args.fd)])


def inherited_socket(fd: int) -> socket.socket:
    """The listening socket the supervisor handed down, of the family it has (TCP here)."""
    return socket.socket(fileno=fd)


if __name__ == "__main__":
    main()
