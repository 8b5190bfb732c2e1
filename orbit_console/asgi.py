"""ASGI entry point: HTTP through Django (static files and the liveness probe at the edge,
``ops/edge.py``; the recovery API through a handler of its own, ``ops/handler.py``), WebSockets
through Channels with session authentication and an Origin check, closed as "paused" rather
than failed while the database is away, and as "signed out" once their session has ended
(``ops/sockets.py``).

``daphne orbit_console.asgi:application`` serves both. With the in-memory channel layer the
process also sends batches (``ops/background.py``).
"""

import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orbit_console.settings")

from orbit_console.ops.handler import get_api_application, get_asgi_application

django_asgi_app = get_asgi_application()
api_app = get_api_application()

# Imported once Django is set up: they load models.
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.conf import settings  # noqa: E402
from django.urls import re_path  # noqa: E402

from orbit_console.decisions.batchworker import run_batches, sends_here  # noqa: E402
from orbit_console.events.origins import EventOriginValidator  # noqa: E402
from orbit_console.events.routing import websocket_urlpatterns as api_websockets  # noqa: E402
from orbit_console.feed.consumer import run_feed  # noqa: E402
from orbit_console.ops.background import Background  # noqa: E402
from orbit_console.ops.edge import Edge  # noqa: E402
from orbit_console.ops.socketauth import SessionAuthStack  # noqa: E402
from orbit_console.ops.sockets import OutageGuard, SessionWatch  # noqa: E402
from orbit_console.ops.warmup import warm_up  # noqa: E402
from orbit_console.routing import websocket_urlpatterns  # noqa: E402

# What every request reuses is prepared before the first one (ops/warmup.py).
warm_up()

# Everything loaded so far lives as long as the process: keep it out of the collector's full
# passes, which otherwise stall every socket for tens of milliseconds (docs/performance.md).
gc.freeze()

router = ProtocolTypeRouter(
    {
        "http": Edge(django_asgi_app, api=api_app),
        "websocket": URLRouter(
            [
                # The recovery API's event stream: bearer tokens, its own Origin list.
                re_path(r"^v1/", EventOriginValidator(URLRouter(api_websockets))),
                # The console's sockets: the session (closed with 4401 once it has ended), the
                # deployment's own hosts.
                re_path(
                    r"",
                    AllowedHostsOriginValidator(
                        OutageGuard(
                            SessionAuthStack(SessionWatch(URLRouter(websocket_urlpatterns)))
                        )
                    ),
                ),
            ]
        ),
    }
)
# The batch worker runs here when its pushes could reach no socket from another process (the
# in-memory channel layer: the embedded default, the demo); see decisions/batchworker.py. Every
# server process is a candidate to consume Orbit's event stream (feed/consumer.py).
services = [run_batches] if sends_here("server") else []
if settings.CONSOLE_FEED == "server":
    services.append(run_feed)
application = Background(router, services=services)
