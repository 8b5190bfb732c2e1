"""``manage.py serve`` (issue 12): one replica's whole serving shape on one address — workers
(uvicorn, or daphne) on sockets of their own, a worker that dies started again, SIGTERM stops
everything — and several workers only where they share a channel layer. Workers, and every
supervised child, end with their supervisor however it ends (issue 41)."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from django.conf import settings

from orbit_console.ops.uvicorn_worker import inherited_socket
from orbit_console.ops.workers import SERVERS
from tests.support.servers import child_env, free_port, run_manage, wait_live


def children_of(pid: int) -> list[int]:
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return sorted(found)


def gone(pid: int) -> bool:
    """Whether ``pid`` has ended (a zombie nobody reaped yet has ended too)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def ended_within(pids: list[int], seconds: float) -> float:
    """Wait until every one of ``pids`` has ended; how long it took (fails after ``seconds``)."""
    began = time.monotonic()
    while not all(gone(pid) for pid in pids):
        assert time.monotonic() - began < seconds, f"{pids} still running after {seconds} s"
        time.sleep(0.05)
    return time.monotonic() - began


def workers_of(pid: int, count: int, timeout: float = 60) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if len(found := children_of(pid)) == count:
            return found
        time.sleep(0.1)
    raise AssertionError(f"serve has {children_of(pid)} as workers, not {count}")


@pytest.fixture(params=SERVERS)
def serve(
    live_db: None, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[tuple[str, subprocess.Popen[bytes], Path]]:
    """``manage.py serve`` with one worker of each server on a free port; its URL, process and
    output."""
    port = free_port()
    output = tmp_path / "serve.out"
    bind = ["--bind", f"127.0.0.1:{port}", "--workers", "1", "--server", request.param]
    with output.open("w") as out:
        process = subprocess.Popen(
            [sys.executable, "manage.py", "serve", *bind],
            cwd=settings.BASE_DIR,
            env=child_env(),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        yield f"http://127.0.0.1:{port}", process, output
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()


def test_serve_answers_starts_a_dead_worker_again_and_stops_with_it(
    serve: tuple[str, subprocess.Popen[bytes], Path], request: pytest.FixtureRequest
) -> None:
    """A worker that dies is started again; ``serve`` stopped takes its worker with it. With
    daphne, SIGTERM (what the supervisor does is the same for both servers; uvicorn's own
    SIGTERM, with open WebSockets, is tests/ops/test_kubernetes.py's). With uvicorn, the image's
    default, ``kill -9`` (issue 41): its worker, in a process group of its own, used to go on
    answering on the port with nobody to stop it; its lifeline to the supervisor breaks with the
    supervisor's death, it stops as on SIGTERM, and the port refuses connections."""
    base_url, process, output = serve
    wait_live(base_url, process)
    [worker] = workers_of(process.pid, 1)
    os.kill(worker, signal.SIGKILL)
    deadline = time.monotonic() + 60
    while (current := children_of(process.pid)) in ([], [worker]):
        assert time.monotonic() < deadline, "the dead worker was not started again"
        time.sleep(0.1)
    wait_live(base_url, process)
    assert "child exited; starting it again" in output.read_text()
    # The console (not only the health check) answers through the new worker.
    assert httpx.get(f"{base_url}/signin", timeout=30).status_code == 200

    if request.node.callspec.params["serve"] == "daphne":
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0, output.read_text()
        assert not any(Path(f"/proc/{pid}").exists() for pid in current)
    else:
        process.kill()
        process.wait()
        # SIGTERM's grace (5 s) is within the supervisor's stop timeout (10 s).
        ended_within(current, 20)
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{base_url}/health/live", timeout=2)


STUBBORN = (
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN);"
    " print('up', flush=True); time.sleep(600)"
)
SUPERVISE_STUBBORN = (
    "import sys; from orbit_console.ops.supervisor import Child, Supervisor;"
    " shell = [sys.executable, 'manage.py', 'shell', '--no-imports', '-c', sys.argv[1]];"
    " Supervisor([Child('loop', shell)], stop_timeout=1).run()"
)


def test_a_supervised_command_that_ignores_sigterm_ends_after_its_grace(live_db: None) -> None:
    """Any ``manage.py`` child of a supervisor (the demo's loops, ``serve`` itself under the
    demo) takes up its lifeline; one that does not stop on SIGTERM (a request or a round that
    never returns) ends anyway, ``stop_timeout`` seconds after its supervisor was killed."""
    supervisor = subprocess.Popen(
        [sys.executable, "-c", SUPERVISE_STUBBORN, STUBBORN],
        cwd=settings.BASE_DIR,
        env=child_env(),
        stdout=subprocess.PIPE,
    )
    try:
        assert supervisor.stdout is not None
        assert supervisor.stdout.readline() == b"up\n"
        [child] = children_of(supervisor.pid)
    finally:
        supervisor.kill()
        supervisor.wait()
    took = ended_within([child], 15)
    assert took >= 0.5  # it ignored the SIGTERM and waited for its grace (1 s)


@pytest.mark.skipif(not os.environ.get("REDIS_URL"), reason="several workers share Redis")
def test_serve_runs_one_worker_per_core_with_a_shared_channel_layer(live_db: None) -> None:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--bind", f"127.0.0.1:{port}"],
        cwd=settings.BASE_DIR,
        env=child_env(ORBIT_WORKERS=""),
    )
    try:
        wait_live(f"http://127.0.0.1:{port}", process)
        workers_of(process.pid, os.cpu_count() or 1)  # fails unless one worker per core
    finally:
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0


def test_serve_refuses_several_workers_without_a_shared_channel_layer() -> None:
    """The in-memory channel layer lives in one process: live pushes would miss the others."""
    done = run_manage(
        "serve", "--bind", "127.0.0.1:0", "--workers", "2", env=child_env(REDIS_URL="")
    )
    assert done.returncode != 0
    assert "2 workers need a channel layer they share: set REDIS_URL" in done.stderr


@pytest.mark.parametrize("bind", ["8000", "localhost:", ":8000"])
def test_serve_refuses_an_address_that_is_not_host_and_port(bind: str) -> None:
    done = run_manage("serve", "--bind", bind, env=child_env(REDIS_URL=""))
    assert done.returncode != 0
    assert "--bind takes HOST:PORT" in done.stderr


def test_a_uvicorn_worker_takes_its_inherited_socket_for_what_it_is() -> None:
    """``uvicorn --fd`` takes any inherited socket for a Unix one, and a TCP socket so taken
    loses TCP_NODELAY: every small answer then waited 40 ms for the peer's delayed ACK."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        taken = inherited_socket(os.dup(listening.fileno()))
        try:
            assert taken.family == socket.AF_INET
            assert taken.getsockname() == listening.getsockname()
        finally:
            taken.close()
