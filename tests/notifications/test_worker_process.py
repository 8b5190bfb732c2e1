"""The delivery worker as a process (issue 32): killed mid-delivery, it loses nothing and the
receiver sees one message under one ``webhook-id``."""

import os
import signal
import subprocess
import sys
from typing import Any

import httpx
import pytest
from django.conf import settings

from orbit_console.notifications import webhooks
from orbit_console.notifications.models import MessageState, WebhookMessage
from tests.notifications.conftest import person, propose, wait_for
from tests.support.receivers import Receiver, Reply
from tests.support.servers import child_env, free_port

WORKER_ENV = {
    "CONSOLE_WEBHOOK_ALLOWED_NETWORKS": "127.0.0.0/8",
    "CONSOLE_WEBHOOK_CONNECT_TIMEOUT": "1",
    "CONSOLE_WEBHOOK_TIMEOUT": "3",  # the claim's lease: 3 + 5 = 8 s
    "CONSOLE_WEBHOOK_BACKOFF_SECONDS": "0",
    "LOG_LEVEL": "WARNING",
}


def start_worker() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "manage.py", "notify", "deliver", "--interval", "0.2"],
        cwd=settings.BASE_DIR,
        env=child_env(**WORKER_ENV),
    )


def test_a_worker_killed_mid_delivery_loses_nothing_and_sends_one_id(
    namespace: str, settings: Any, receiver: Receiver
) -> None:
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    # The first request is held long past the kill; every later one is answered at once.
    receiver.script = lambda n: Reply(204, delay=20 if n == 1 else 0)
    endpoint, secret = webhooks.endpoint_add(
        namespace_id=namespace, url=receiver.url, event_types=[]
    )
    receiver.secrets.append(secret)
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)
    message = WebhookMessage.objects.get(endpoint=endpoint)

    worker = start_worker()
    try:
        assert wait_for(lambda: receiver.requests >= 1, 120), "the worker never sent"
        os.kill(worker.pid, signal.SIGKILL)  # mid-delivery: the answer has not come
        worker.wait(timeout=30)
        claimed = WebhookMessage.objects.get(id=message.id)
        assert (claimed.state, claimed.attempts) == (MessageState.PENDING, 1)

        worker = start_worker()
        assert wait_for(
            lambda: WebhookMessage.objects.get(id=message.id).state == MessageState.DELIVERED, 90
        ), "not delivered after the lease"
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)

    delivered = WebhookMessage.objects.get(id=message.id)
    assert delivered.attempts == 2 and delivered.response_code == 204
    assert list(receiver.verified) == [message.id]  # one id, kept once by the receiver
    assert receiver.bad_signatures == 0


def test_the_worker_answers_its_health_and_beats_on_its_own_port(namespace: str) -> None:
    """Its own port, as the reconciler's: ready once a pass succeeded, and the heartbeat the
    NotifierNotTicking alert reads (deploy/prometheus/alerts.yml) on ``/metrics``."""
    port = free_port()
    health = f"http://127.0.0.1:{port}"
    command = ["manage.py", "notify", "deliver", "--interval", "0.2", "--health-port", str(port)]
    worker = subprocess.Popen(
        [sys.executable, *command],
        cwd=settings.BASE_DIR,
        env=child_env(**WORKER_ENV, METRICS_TOKEN="notifier-metrics"),
    )
    try:

        def ready() -> bool:
            try:
                answer = httpx.get(f"{health}/health/ready", timeout=5)
            except httpx.TransportError:
                return False
            return answer.status_code == 200 and bool(answer.json().get("last_success"))

        assert wait_for(ready, 120), "the worker never answered ready"
        assert httpx.get(f"{health}/health/live", timeout=5).status_code == 200
        metrics = httpx.get(
            f"{health}/metrics", headers={"Authorization": "Bearer notifier-metrics"}, timeout=30
        )
        assert metrics.status_code == 200, metrics.text
        assert 'orbit_loop_last_success_timestamp_seconds{loop="notifier"}' in metrics.text
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)


@pytest.mark.skipif(
    not os.environ.get("REDIS_URL"), reason="processes share wake-ups through Redis (REDIS_URL)"
)
def test_a_commit_in_another_process_wakes_the_worker_through_the_channel_layer(
    namespace: str, settings: Any, receiver: Receiver
) -> None:
    """The worker polls once a minute here: a message that reaches the receiver well within
    that minute was sent because the commit woke it, across processes (issue 44)."""
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    endpoint, secret = webhooks.endpoint_add(
        namespace_id=namespace, url=receiver.url, event_types=[]
    )
    receiver.secrets.append(secret)
    person(namespace, "supervisor")
    author = person(namespace, "operator")
    propose(author, namespace)
    worker = subprocess.Popen(
        [sys.executable, "manage.py", "notify", "deliver", "--interval", "60"],
        cwd=settings.BASE_DIR,
        env=child_env(**WORKER_ENV),
    )
    try:
        # Its first pass, at its start, sends what was owed before it.
        assert wait_for(lambda: len(receiver.verified) == 1, 120), "the worker never sent"
        propose(author, namespace)
        # Without the wake-up: the next poll, 30 s (the longest pause) to 60 s from now.
        assert wait_for(lambda: len(receiver.verified) == 2, 15), "not woken by the commit"
    finally:
        worker.send_signal(signal.SIGTERM)
        worker.wait(timeout=30)
    assert WebhookMessage.objects.filter(endpoint=endpoint, state="delivered").count() == 2
