"""A TCP proxy between the console and the recovery API that can lose things on purpose.

Modes, switchable while the servers run:

- ``pass``: forward both ways;
- ``drop_writes``: forward POST requests, let the API commit, then close the console's
  connection without an answer (the response is lost on its way back);
- ``refuse_writes``: close the console's connection as soon as a POST arrives, without
  forwarding it (the API is unreachable for the write; reads still work);
- ``down``: close every connection at once (the API is unreachable).

Besides the mode, one ``WriteFault`` can be armed for the next write: something to do before
it is forwarded (kill the API or the console), whether it is forwarded, something to do once
the API has answered (kill the API, cut the database), and whether the answer goes back.

Connections carry one request each (the console opens a client per call), so the proxy reads
a whole request, decides, and forwards it over a fresh upstream connection.

``TcpProxy`` is the byte-level kind, in front of the database or Redis (the fault suite,
``bench/faults.py``).
"""

import contextlib
import socket
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

MODES = ("pass", "drop_writes", "refuse_writes", "down")


def _accepted(server: socket.socket) -> Iterator[socket.socket]:
    """The connections ``server`` accepts, until it is closed."""
    while True:
        try:
            client, _ = server.accept()
        except OSError:
            return
        yield client


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


@dataclass(frozen=True)
class WriteFault:
    """What happens to the next write (POST) through the proxy, once."""

    before: Callable[[], None] | None = None  # before it is forwarded
    forward: bool = True  # whether the API gets it
    after: Callable[[], None] | None = None  # once the API has answered
    answer: bool = True  # whether the answer goes back to the console


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
        self._armed: WriteFault | None = None
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

    def arm(self, fault: WriteFault | None) -> None:
        """``fault`` happens to the next write (``None``: disarm)."""
        with self._lock:
            self._armed = fault

    def close(self) -> None:
        self._server.close()

    def _accept(self) -> None:
        for client in _accepted(self._server):
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        # The API (or the console) may be gone — killed by a fault — at any point: the
        # connection then just ends, as it would without the proxy.
        with client, contextlib.suppress(OSError):
            with self._lock:
                mode = self.mode
            if mode == "down":
                return
            request = _read_message(client)
            if not request:
                return
            request_line = request.split(b"\r\n", 1)[0].decode("latin-1")
            is_write = request_line.startswith("POST ")
            fault = self._take_fault() if is_write else None
            if fault is not None and fault.before is not None:
                fault.before()
            if is_write and (mode == "refuse_writes" or (fault and not fault.forward)):
                self.refused.append(request_line)
                return
            with socket.create_connection(
                ("127.0.0.1", self.upstream_port), timeout=60
            ) as upstream:
                upstream.sendall(_with_connection_close(request))
                response = _read_message(upstream)
            if fault is not None and fault.after is not None:
                fault.after()
            if is_write and (mode == "drop_writes" or (fault and not fault.answer)):
                self.dropped.append(request_line)
                return
            self.forwarded.append(request_line)
            client.sendall(response)

    def _take_fault(self) -> WriteFault | None:
        with self._lock:
            fault, self._armed = self._armed, None
        return fault


# --- A byte-level proxy (the database, Redis) -------------------------------------------------

TCP_MODES = ("pass", "refuse", "hang")


class TcpProxy:
    """A TCP proxy in front of a server that speaks any protocol (MySQL/MariaDB, Redis), with
    the faults a network or a sick server gives, switchable while clients are connected:

    - ``pass``: forward both ways;
    - ``refuse``: close each new connection as soon as it is accepted (the server is down);
    - ``hang``: accept, and forward nothing either way on any connection until the mode
      changes (a server that stopped answering: a paused process, a full disk, a lock); what
      was held is then delivered, to whoever still waits;
    - ``cut()``: reset every open connection now (a crash, a failover, a network cut).
    """

    def __init__(self, upstream: tuple[str, int], *, port: int = 0) -> None:
        self.upstream = upstream
        self.mode = "pass"
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._flowing = threading.Event()
        self._flowing.set()
        self._server = socket.socket()
        self._server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._server.bind(("127.0.0.1", port))
        self.port: int = self._server.getsockname()[1]
        self._server.listen(128)
        threading.Thread(target=self._accept, daemon=True).start()

    def set_mode(self, mode: str) -> None:
        if mode not in TCP_MODES:
            raise ValueError(mode)
        with self._lock:
            self.mode = mode
        if mode == "hang":
            self._flowing.clear()
        else:
            self._flowing.set()

    def cut(self) -> int:
        """Reset every open connection (RST, not a polite close); how many there were."""
        with self._lock:
            victims, self._open = self._open, set()
        for sock in victims:
            _reset(sock)
        return len(victims) // 2

    def close(self) -> None:
        self._server.close()
        self._flowing.set()
        self.cut()

    def _accept(self) -> None:
        for client in _accepted(self._server):
            with self._lock:
                mode = self.mode
            if mode == "refuse":
                _reset(client)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=5)
            except OSError:
                _reset(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open |= {client, upstream}
            for source, target in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, target), daemon=True).start()

    def _pump(self, source: socket.socket, target: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                self._flowing.wait()
                target.sendall(data)
        except OSError:
            pass
        with self._lock:
            self._open -= {source, target}
        for sock in (source, target):
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()


def _reset(sock: socket.socket) -> None:
    """Drop a connection at once: no lingering, and a reader blocked on it wakes up."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
