"""How many server processes a replica runs, and which server each one is.

Two ASGI servers can run a worker, both serving HTTP and WebSockets (docs/performance.md,
"Which server"):

- ``uvicorn`` (the default, ``ops/uvicorn_worker.py``): uvicorn on uvloop with httptools'
  HTTP parser and the ``websockets`` package; measured here at 1.6 times daphne's reviews a
  second on the same cores, because its HTTP path costs a fraction of Twisted's;
- ``daphne``: Channels' own server, on Twisted; ``ORBIT_SERVER=daphne`` or
  ``serve --server daphne``.
"""

import os
import sys

from django.conf import settings

from orbit_console.lib.env import env_int, env_str

IN_MEMORY_LAYER = "channels.layers.InMemoryChannelLayer"
APPLICATION = "orbit_console.asgi:application"
SERVERS = ("uvicorn", "daphne")


def shares_channel_layer() -> bool:
    """Whether processes share live pushes: any layer but the in-memory one."""
    return bool(settings.CHANNEL_LAYERS["default"]["BACKEND"] != IN_MEMORY_LAYER)


def default_workers() -> int:
    """``ORBIT_WORKERS``, else one per core when processes can share a channel layer, else 1."""
    return env_int(
        "ORBIT_WORKERS", (os.cpu_count() or 1) if shares_channel_layer() else 1, minimum=1
    )


def default_server() -> str:
    """``ORBIT_SERVER``: ``uvicorn`` unless it says ``daphne``."""
    server = env_str("ORBIT_SERVER", "uvicorn")
    if server not in SERVERS:
        raise ValueError(f"ORBIT_SERVER must be one of {', '.join(SERVERS)}, not {server!r}")
    return server


def worker_argv(
    server: str,
    *,
    fd: int | None = None,
    host: str = "127.0.0.1",
    port: int = 8000,
    proxy_headers: bool = False,
    application: str = APPLICATION,
) -> list[str]:
    """The command line of one worker of ``server`` on an inherited listening socket (``fd``)
    or on ``host:port``. With ``proxy_headers`` the client address comes from the reverse
    proxy's ``X-Forwarded-For`` (the replicas are reachable only through it)."""
    if server == "daphne":
        bind = ["--fd", str(fd)] if fd is not None else ["-b", host, "-p", str(port)]
        proxy = ["--proxy-headers"] if proxy_headers else []
        return [sys.executable, "-m", "daphne", *bind, "-v", "0", *proxy, application]
    if server != "uvicorn":
        raise ValueError(f"no such server: {server!r}")
    bind = ["--fd", str(fd)] if fd is not None else ["--host", host, "--port", str(port)]
    proxy = ["--proxy-headers"] if proxy_headers else []
    chosen = ["--application", application] if application != APPLICATION else []
    return [sys.executable, "-m", "orbit_console.ops.uvicorn_worker", *bind, *proxy, *chosen]
