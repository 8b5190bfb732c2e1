"""Child processes kept running: started together, restarted when one exits, stopped together.

``manage.py serve`` keeps its web workers with it and ``manage.py demo`` its server and
reconciler. A child that exits on its own is started again at once, or after a pause that
doubles while it keeps dying within seconds of its start (1 s up to 30 s), so a child that
cannot start does not spin. SIGTERM, SIGINT or SIGHUP stops everything: the children get
SIGTERM, and SIGKILL if they are still there after ``stop_timeout`` seconds.

Each child runs in a process group of its own: Ctrl-C in a terminal signals the foreground
group, which is then the supervisor alone, so the children are stopped by it, in order, rather
than each printing its own KeyboardInterrupt traceback (issue 30). A second Ctrl-C while they
stop changes nothing. So that they do not outlive a supervisor that is killed outright, each
child holds a lifeline to it (``ops/lifeline.py``): when the supervisor ends, however it ends,
its children stop within ``stop_timeout`` seconds (issue 41).
"""

import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType

from orbit_console.ops.lifeline import Lifeline

logger = logging.getLogger("orbit.supervisor")

QUICK_EXIT_SECONDS = 10.0
MAX_PAUSE_SECONDS = 30.0


@dataclass
class Child:
    """One program to keep running, with the file descriptors it inherits."""

    name: str
    argv: Sequence[str]
    pass_fds: tuple[int, ...] = ()
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    started_at: float = 0.0
    quick_exits: int = 0
    restart_at: float | None = None


class _Stop(Exception):
    pass


class Supervisor:
    def __init__(
        self,
        children: Sequence[Child],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        stop_timeout: float = 10.0,
        poll_seconds: float = 0.2,
    ) -> None:
        self.children = list(children)
        self.env = dict(os.environ if env is None else env)
        self.cwd = cwd
        self.stop_timeout = stop_timeout
        self.poll_seconds = poll_seconds
        self._stopping = False
        self._lifeline = Lifeline(grace=stop_timeout)

    def run(self) -> None:
        """Run until SIGTERM or SIGINT, then stop every child."""
        previous = {
            signum: signal.signal(signum, self._on_signal)
            for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
        }
        try:
            for child in self.children:
                self._start(child)
            while True:
                self._tend(time.monotonic())
                time.sleep(self.poll_seconds)
        except _Stop:
            pass
        finally:
            self.stop()
            self._lifeline.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        if self._stopping:
            return  # stopping already: a second Ctrl-C must not interrupt it
        self._stopping = True
        raise _Stop

    def _start(self, child: Child) -> None:
        # Fixed argument lists built by our own commands: nothing untrusted.
        child.process = subprocess.Popen(  # noqa: S603
            list(child.argv),
            env={**self.env, **self._lifeline.env},
            cwd=self.cwd,
            pass_fds=(*child.pass_fds, self._lifeline.fd),
            process_group=0,
        )
        child.started_at = time.monotonic()
        child.restart_at = None

    def _tend(self, now: float) -> None:
        for child in self.children:
            if child.restart_at is not None:
                if now >= child.restart_at:
                    self._start(child)
                continue
            code = child.process.poll() if child.process is not None else -1
            if code is None:
                continue
            quick = now - child.started_at < QUICK_EXIT_SECONDS
            child.quick_exits = child.quick_exits + 1 if quick else 0
            pause = min(MAX_PAUSE_SECONDS, 2.0 ** (child.quick_exits - 1)) if quick else 0.0
            logger.error(
                "child exited; starting it again",
                extra={"child": child.name, "exit_code": code, "restart_in_s": pause},
            )
            child.restart_at = now + pause

    def stop(self) -> None:
        self._stopping = True
        running = [c.process for c in self.children if c.process and c.process.poll() is None]
        for process in running:
            process.terminate()
        deadline = time.monotonic() + self.stop_timeout
        for process in running:
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
