"""Heartbeats of the long-running loops (the reconciler, the audit checkpoint job), served by
the process that runs each of them (issue 14).

A loop beats after every round that succeeds and counts the rounds that fail; it never stops
on a failed round. With ``--health-port`` its process answers ``/health/live``,
``/health/ready`` (503 once no round has succeeded for ``stale_after`` seconds: the loop is
stalled, which a restart may fix) and ``/metrics`` (the same bearer-token rule as the console's:
``METRICS_TOKEN``), so that an orchestrator and Prometheus see a stuck loop, not just a live
process.
"""

import json
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from django.db import connections
from prometheus_client import CONTENT_TYPE_LATEST, Counter, Gauge

from orbit_console.ops.metrics import bears_metrics_token, probe_and_expose

LAST_SUCCESS = Gauge(
    "orbit_loop_last_success_timestamp_seconds",
    "When a round of the loop last succeeded (Unix time)",
    ["loop"],
)
FAILURES = Counter("orbit_loop_failures_total", "Rounds of the loop that failed", ["loop"])


class Heartbeat:
    def __init__(self, loop: str, *, stale_after: float) -> None:
        self.loop = loop
        self.stale_after = stale_after
        self.started = time.time()
        self.last_success: float | None = None
        self.last_error = ""
        LAST_SUCCESS.labels(loop=loop)
        FAILURES.labels(loop=loop)

    def beat(self) -> None:
        self.last_success = time.time()
        LAST_SUCCESS.labels(loop=self.loop).set(self.last_success)

    def failed(self, error: BaseException) -> None:
        FAILURES.labels(loop=self.loop).inc()
        self.last_error = type(error).__name__

    def state(self, now: float | None = None) -> tuple[bool, dict[str, Any]]:
        """Whether the loop is ready (a round succeeded within ``stale_after``, or it started
        that recently), and what ``/health/ready`` says about it."""
        now = time.time() if now is None else now
        since = now - (self.last_success or self.started)
        ready = since <= self.stale_after
        return ready, {
            "loop": self.loop,
            "status": "ready" if ready else "stalled",
            "last_success": _utc(self.last_success),
            "seconds_since_success": round(since, 3) if self.last_success else None,
            "last_error": self.last_error,
        }


def _utc(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat().replace("+00:00", "Z")


def serve_health(heartbeat: Heartbeat, port: int, host: str = "0.0.0.0") -> ThreadingHTTPServer:  # noqa: S104 -- a container's own port
    """Answer the loop's health and metrics on ``host:port`` from a daemon thread."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/health/live":
                self._json(200, {"status": "live", "loop": heartbeat.loop})
            elif self.path == "/health/ready":
                ready, body = heartbeat.state()
                self._json(200 if ready else 503, body)
            elif self.path == "/metrics" and bears_metrics_token(
                self.headers.get("Authorization", "")
            ):
                try:
                    exposed = probe_and_expose()
                finally:
                    # Each request has a thread, and so database connections, of its own.
                    connections.close_all()
                self._send(200, CONTENT_TYPE_LATEST, exposed)
            else:
                self._json(404, {"status": "not found"})

        def _json(self, status: int, body: dict[str, Any]) -> None:
            self._send(status, "application/json", json.dumps(body).encode())

        def _send(self, status: int, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            """Probes every few seconds are not worth a log line each."""

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(
        target=server.serve_forever, name=f"{heartbeat.loop}-health", daemon=True
    ).start()
    return server
