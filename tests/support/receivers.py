"""A real webhook receiver for tests: an HTTP server on a thread of the test process that
verifies every request with the ``standardwebhooks`` library (not our code) and keeps each
``webhook-id`` once, as a receiver should. What it answers is set per test (``script``),
awkward shapes included: late (``delay``), never (``hang``), or headers at once and then the
body one byte at a time (``drip``)."""

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


@dataclass
class Reply:
    status: int = 204
    headers: dict[str, str] = field(default_factory=dict)
    delay: float = 0.0
    # Headers at once, then a body of ``drip_bytes`` bytes, one every ``drip`` seconds.
    drip: float = 0.0
    drip_bytes: int = 100
    # Read the request, then answer nothing until the receiver stops.
    hang: bool = False


@dataclass
class Receiver:
    secrets: list[str]
    # Called with the number of the request (from 1): what to answer.
    script: Callable[[int], Reply] = lambda n: Reply()
    requests: int = 0
    verified: dict[str, Any] = field(default_factory=dict)  # webhook-id -> payload (once)
    duplicates: list[str] = field(default_factory=list)
    bad_signatures: int = 0
    received_at: dict[str, float] = field(default_factory=dict)
    # Requests whose answer the sender stopped reading (it closed the connection).
    cut_off: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    server: ThreadingHTTPServer | None = None
    stopped: threading.Event = field(default_factory=threading.Event)

    @property
    def url(self) -> str:
        assert self.server is not None
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def start(self) -> "Receiver":
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                with receiver.lock:
                    receiver.requests += 1
                    number = receiver.requests
                reply = receiver.script(number)
                if reply.hang:
                    receiver.stopped.wait()
                    return
                if reply.delay:
                    time.sleep(reply.delay)
                headers = dict(self.headers.items())
                payload = None
                for secret in receiver.secrets:
                    try:
                        payload = Webhook(secret).verify(body, headers)
                        break
                    except WebhookVerificationError:
                        continue
                with receiver.lock:
                    if payload is None:
                        receiver.bad_signatures += 1
                    elif 200 <= reply.status < 300:
                        msg_id = headers["webhook-id"]
                        if msg_id in receiver.verified:
                            receiver.duplicates.append(msg_id)
                        else:
                            receiver.verified[msg_id] = payload
                            receiver.received_at[msg_id] = time.time()
                status = reply.status if payload is not None else 401
                self.send_response(status)
                for name, value in reply.headers.items():
                    self.send_header(name, value)
                length = reply.drip_bytes if reply.drip else 0
                self.send_header("content-length", str(length))
                self.end_headers()
                try:
                    for _ in range(length):
                        self.wfile.write(b".")
                        self.wfile.flush()
                        if receiver.stopped.wait(reply.drip):
                            return
                except OSError:
                    with receiver.lock:
                        receiver.cut_off += 1

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()
        return self

    def stop(self) -> None:
        self.stopped.set()
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()

    def payloads(self) -> list[Any]:
        with self.lock:
            return list(self.verified.values())


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)
