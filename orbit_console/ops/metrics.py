"""Prometheus metrics, served at a path that is not public by default.

``/metrics`` answers only when ``METRICS_TOKEN`` is set, and only to requests that bear it
(``Authorization: Bearer <token>``); otherwise it is a plain 404, as if it did not exist. The
reverse proxy never routes it (deploy/nginx.conf): Prometheus scrapes each console process
directly. Series that describe the database (submissions, batches and approvals, the
reconciler's backlog and lag, checkpoints and verification, the event stream's deliveries, the
feed's lease) are read at scrape time by the collectors the owning apps register
(``lib/scrape.py``); the live layer counts its own publishing (``lib/live.py``).

Every scrape first probes the database and the channel layer as ``/health/ready`` does
(``orbit_dependency_up``), and leaves the database's gauges out while it is unreachable: the
answer still comes, and says why the rest is missing. Alert rules that read these series:
``deploy/prometheus/alerts.yml``; ``tests/ops/test_alerts.py`` fails when one they name is no
longer exported.
"""

import asyncio
import hmac

from asgiref.sync import sync_to_async
from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)

from orbit_console.lib.scrape import database_reachable
from orbit_console.ops.views import dependency_checks

REQUEST_LATENCY = Histogram(
    "orbit_http_request_duration_seconds",
    "Time to answer an HTTP request, by view",
    ["view", "method", "status"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
API_CALLS = Counter(
    "orbit_recovery_api_calls_total",
    "Calls from the console to the recovery API, by operation and outcome",
    ["operation", "outcome"],
)
API_ANSWERS = Counter(
    "orbit_recovery_api_answers_total",
    "Answers of the embedded recovery API, by endpoint and HTTP status",
    ["endpoint", "status"],
)
WEBSOCKETS_OPEN = Gauge(
    "orbit_websockets_open", "WebSocket connections open in this process", ["consumer"]
)
# Exported at 0 from the start, so that a scrape before the first socket still sees the series.
for _consumer in ("timeline", "approvals"):
    WEBSOCKETS_OPEN.labels(consumer=_consumer)


IN_FLIGHT = Gauge(
    "orbit_http_requests_in_flight",
    "Signed-in people's page requests this process is serving now (bounded by"
    " CONSOLE_MAX_IN_FLIGHT)",
)
IN_FLIGHT_LIMIT = Gauge(
    "orbit_http_requests_in_flight_limit",
    "CONSOLE_MAX_IN_FLIGHT of this process (0: no bound)",
)
SHED = Counter(
    "orbit_http_requests_shed_total",
    "Signed-in people's page requests answered 503 because the process already served its"
    " bound of them",
)
ANONYMOUS_IN_FLIGHT = Gauge(
    "orbit_http_anonymous_requests_in_flight",
    "Requests of nobody signed in (sign-in pages, company sign-in, back-channel logout) this"
    " process is serving now (bounded by CONSOLE_ANONYMOUS_MAX_IN_FLIGHT)",
)
ANONYMOUS_IN_FLIGHT_LIMIT = Gauge(
    "orbit_http_anonymous_requests_in_flight_limit",
    "CONSOLE_ANONYMOUS_MAX_IN_FLIGHT of this process (0: no bound)",
)
ANONYMOUS_SHED = Counter(
    "orbit_http_anonymous_requests_shed_total",
    "Requests of nobody signed in answered 503, by reason: the anonymous lane was full"
    " (bound), or their address already had CONSOLE_ANONYMOUS_MAX_IN_FLIGHT_PER_ADDRESS of it"
    " (address)",
    ["reason"],
)
# Exported at 0 from the start, so that a scrape before the first shed sees the series.
for _reason in ("bound", "address"):
    ANONYMOUS_SHED.labels(reason=_reason)


DEPENDENCY_UP = Gauge(
    "orbit_dependency_up",
    "Whether this process reached the dependency when it was last scraped (1) or not (0)",
    ["dependency"],
)


def bears_metrics_token(authorization: str) -> bool:
    """Whether an ``Authorization`` header bears ``METRICS_TOKEN`` (never, while it is unset)."""
    token = settings.METRICS_TOKEN
    scheme, _, presented = authorization.partition(" ")
    return (
        bool(token)
        and scheme.lower() == "bearer"
        and hmac.compare_digest(presented.encode(), token.encode())
    )


async def metrics(request: HttpRequest) -> HttpResponse:
    if not bears_metrics_token(request.headers.get("Authorization", "")):
        raise Http404
    body = await sync_to_async(exposition)(await probe_dependencies())
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)


async def probe_dependencies() -> bool:
    """Probe the database and the channel layer (``orbit_dependency_up``); whether the
    database answered."""
    checks = await dependency_checks()
    for dependency, result in checks.items():
        DEPENDENCY_UP.labels(dependency=dependency).set(1 if result == "ok" else 0)
    return checks["database"] == "ok"


def exposition(database_up: bool) -> bytes:
    """The registry in Prometheus' text format; the database's gauges only if it answered."""
    token = database_reachable.set(database_up)
    try:
        return generate_latest(REGISTRY)
    finally:
        database_reachable.reset(token)


def probe_and_expose() -> bytes:
    """Both, from a thread without an event loop (the loops' own ``/metrics``)."""
    return exposition(asyncio.run(probe_dependencies()))
