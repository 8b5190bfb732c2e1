"""Django's ASGI handler, with the synchronous work of every request on one thread.

Django runs each ASGI request inside asgiref's ``ThreadSensitiveContext``, which gives the
request a thread pool of its own: the request's first hop to synchronous code starts a new
thread, that thread opens a new database connection, and both are thrown away when the
request ends. Profiles of the review API showed thread start-up alone as 15 % of the server's
samples (docs/performance.md). Without the context, ``sync_to_async(thread_sensitive=True)``
sends every request's synchronous work to asgiref's one shared sync thread, which keeps its
database connection (``CONN_MAX_AGE``) from one request to the next.

What that changes: a process runs one piece of synchronous work at a time. Those pieces are
short here by design (an API view is one transaction; console views hop to the sync thread
only for their own reads and never across a call to the API, docs/architecture.md), and a
replica runs several processes (``manage.py serve``), so the cores stay busy.
"""

from typing import Any

import django
from django.core.handlers.asgi import ASGIHandler


class SharedThreadASGIHandler(ASGIHandler):
    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            raise ValueError(f"Django can only handle ASGI/HTTP connections, not {scope['type']}.")
        await self.handle(scope, receive, send)


def get_asgi_application() -> SharedThreadASGIHandler:
    """``django.core.asgi.get_asgi_application`` with the shared-thread handler."""
    django.setup(set_prefix=False)
    return SharedThreadASGIHandler()
