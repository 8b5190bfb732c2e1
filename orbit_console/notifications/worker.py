"""The delivery worker: ``manage.py notify deliver`` (started by ``manage.py demo`` too).

Each pass scans for what time causes (``scans.py``), then sends the emails and webhook
messages that are due. Everything it does is recorded before and after each attempt, so a
restart loses nothing (docs/notifications.md). A commit that writes a notification wakes the
worker of its own process at once; others poll every ``interval``.
"""

import logging
import threading

import httpx
from django.db import close_old_connections
from django.utils import timezone

from orbit_console.notifications import mail, scans, webhooks
from orbit_console.ops.loops import Heartbeat

logger = logging.getLogger("orbit.notifications.worker")

_wake = threading.Event()


def wake() -> None:
    _wake.set()


def deliver_once(client: httpx.Client) -> int:
    now = timezone.now()
    scans.scan(now)
    return mail.deliver_due(now=now) + webhooks.deliver_due(client, now=now)


def run(
    *,
    interval: float,
    stop: threading.Event,
    once: bool = False,
    heartbeat: Heartbeat | None = None,
) -> None:
    """Pass after pass until ``stop``; each pass that succeeds beats ``heartbeat`` (its
    ``--health-port`` and the NotifierNotTicking alert read it), each that fails counts."""
    failures = 0
    with webhooks.new_client() as client:
        while not stop.is_set():
            close_old_connections()
            try:
                deliver_once(client)
                failures = 0
                if heartbeat is not None:
                    heartbeat.beat()
            except Exception as error:
                failures += 1
                logger.exception("a notification pass failed")
                if heartbeat is not None:
                    heartbeat.failed(error)
            if once:
                return
            _wake.wait(min(interval * (2 ** min(failures, 5)), 30.0))
            _wake.clear()
