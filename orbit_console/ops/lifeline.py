"""A supervised child ends when its supervisor does (issue 41).

The supervisor (``ops/supervisor.py``) runs each child in a process group of its own, so a
signal to the supervisor's group never reaches the children, and a supervisor killed outright
(``kill -9``, the out-of-memory killer) cannot stop them: they went on serving on the port, or
looping, with nobody to stop them. So every child holds a lifeline: the read end of a pipe
whose only write end the supervisor holds. The kernel closes that write end when the
supervisor ends, however it ends; the child's watcher then reads end-of-file, and the child
stops as if the supervisor had stopped it: SIGTERM to itself (a worker finishes what it serves
and closes its WebSockets with 1012; a loop ends its round), and, if it is still there
``grace`` seconds later (a request stuck in a view, a handler that never returns), it ends at
once. A pipe rather than Linux's parent-death signal: it works wherever there are pipes, and
the child decides how to end.

The supervisor hands the pipe down with ``lifeline_for_children`` (the descriptor to pass and
the environment that names it); every Django process (``manage.py`` commands and the ASGI
workers alike) takes it up when the ``ops`` app is ready (``watch_supervisor``). The variables
are removed from the environment once read, so that no process the child starts in turn
mistakes another descriptor of the same number for a lifeline.
"""

import contextlib
import logging
import os
import signal
import stat
import threading
import time

logger = logging.getLogger("orbit.lifeline")

FD_VARIABLE = "ORBIT_LIFELINE_FD"
GRACE_VARIABLE = "ORBIT_LIFELINE_GRACE_SECONDS"
DEFAULT_GRACE_SECONDS = 10.0


class Lifeline:
    """A pipe: the supervisor keeps the write end (never inherited), the children get the read
    end (``fd``) and the environment that names it (``env``)."""

    def __init__(self, grace: float) -> None:
        self.fd, self._write_fd = os.pipe()  # both close on exec unless passed on purpose
        self.env = {FD_VARIABLE: str(self.fd), GRACE_VARIABLE: f"{grace:g}"}

    def close(self) -> None:
        for fd in (self.fd, self._write_fd):
            with contextlib.suppress(OSError):
                os.close(fd)


def watch_supervisor() -> threading.Thread | None:
    """If this process was handed a lifeline, watch it from a daemon thread; the thread."""
    named = os.environ.pop(FD_VARIABLE, "")
    grace_text = os.environ.pop(GRACE_VARIABLE, "")
    if not named:
        return None
    try:
        fd = int(named)
        grace = float(grace_text) if grace_text else DEFAULT_GRACE_SECONDS
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            raise ValueError("not a pipe")
    except (ValueError, OSError) as error:
        logger.warning("no lifeline to watch (%s=%r: %s)", FD_VARIABLE, named, error)
        return None
    thread = threading.Thread(target=_watch, args=(fd, grace), name="lifeline", daemon=True)
    thread.start()
    return thread


def _watch(fd: int, grace: float) -> None:
    try:
        while os.read(fd, 512):
            pass  # the supervisor never writes; the end of the file is all that counts
    except OSError:
        pass
    logger.warning("the supervisor is gone: stopping", extra={"grace_s": grace})
    os.kill(os.getpid(), signal.SIGTERM)
    time.sleep(grace)
    logger.error("still running %ss after the supervisor went: ending now", grace)
    logging.shutdown()
    os._exit(1)
