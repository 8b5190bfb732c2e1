"""A TCP proxy between the console and the recovery API that can lose things on purpose.

Modes, switchable while the servers run:

- ``pass``: forward both ways;
- ``drop_writes``: forward POST requests, let the API commit, then close the console's
  connection without an answer (the response is lost on its way back);
- ``refuse_writes``: close the console's connection as soon as a POST arrives, without
  forwarding it (the API is unreachable for the write; reads still work);
- ``down``: close every connection at once (the API is unreachable).

Connections carry one request each (the console opens a client per call), so the proxy reads
a whole request, decides, and forwards it over a fresh upstream connection.
"""

import socket
import threading
from dataclasses import dataclass, field

MODES = ("pass", "drop_writes", "refuse_writes", "down")


def _read_message(sock: socket.socket) -> bytes:
    """One HTTP/1.1 message: the head and a Content-Length body (or up to EOF without one)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = None
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    if length is None:
        if head.startswith(b"HTTP/"):
            while chunk := sock.recv(65536):
                body += chunk
        return head + b"\r\n\r\n" + body
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _with_connection_close(request: bytes) -> bytes:
    head, _, body = request.partition(b"\r\n\r\n")
    lines = [
        line
        for line in head.split(b"\r\n")
        if not line.lower().startswith((b"connection:", b"keep-alive:"))
    ]
    lines.append(b"Connection: close")
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@dataclass
class FaultyProxy:
    upstream_port: int
    mode: str = "pass"
    port: int = 0
    forwarded: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", self.port))
        self.port = self._server.getsockname()[1]
        self._server.listen(64)
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def set_mode(self, mode: str) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        with self._lock:
            self.mode = mode

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        with client:
            with self._lock:
                mode = self.mode
            if mode == "down":
                return
            request = _read_message(client)
            if not request:
                return
            request_line = request.split(b"\r\n", 1)[0].decode("latin-1")
            is_write = request_line.startswith("POST ")
            if is_write and mode == "refuse_writes":
                self.refused.append(request_line)
                return
            with socket.create_connection(
                ("127.0.0.1", self.upstream_port), timeout=60
            ) as upstream:
                upstream.sendall(_with_connection_close(request))
                response = _read_message(upstream)
            if is_write and mode == "drop_writes":
                self.dropped.append(request_line)
                return
            self.forwarded.append(request_line)
            client.sendall(response)
