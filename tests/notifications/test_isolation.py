"""One slow peer delays nobody (issue 41): every webhook attempt has a wall-clock deadline for
all of it, attempts run side by side (bounded per endpoint), email has a lane of its own, and
a lease that ran out is taken over. Real receivers verify every signature (``standardwebhooks``);
the email goes to a real SMTP server (aiosmtpd)."""

import threading
from collections import Counter
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from orbit_console.notifications import delivery, wakeup, webhooks, worker
from orbit_console.notifications.models import (
    DeliveryAttempt,
    Endpoint,
    MessageState,
    WebhookMessage,
)
from tests.notifications.conftest import Inbox, person, propose, wait_for
from tests.support.receivers import Receiver, Reply

DEADLINE = 3  # seconds; the dripping receiver's answer would take 20
SUPERVISOR = "supervisor@example.test"


def hook(receiver: Receiver, namespace: str) -> Endpoint:
    endpoint, secret = webhooks.endpoint_add(
        namespace_id=namespace, url=receiver.url, event_types=[]
    )
    receiver.secrets.append(secret)
    return endpoint


@pytest.fixture
def receivers() -> Iterator[dict[str, Receiver]]:
    found = {
        # Headers at once, then one byte every 0.2 s for 20 s: no read ever waits a second.
        "dripping": Receiver(secrets=[], script=lambda n: Reply(200, drip=0.2, drip_bytes=100)),
        "hanging": Receiver(secrets=[], script=lambda n: Reply(hang=True)),
        "healthy": Receiver(secrets=[]),
    }
    for receiver in found.values():
        receiver.start()
    yield found
    for receiver in found.values():
        receiver.stop()


@pytest.fixture
def running_worker() -> Iterator[None]:
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, kwargs={"interval": 0.2, "stop": stop})
    thread.start()
    yield
    stop.set()
    wakeup.wake()
    thread.join(timeout=30)
    assert not thread.is_alive()


def the_try(endpoint: Endpoint, proposal_id: str, number: int = 1) -> DeliveryAttempt:
    return DeliveryAttempt.objects.get(
        message__endpoint=endpoint, message__notification__proposal_id=proposal_id, number=number
    )


def test_a_dripping_and_a_hanging_receiver_delay_neither_a_healthy_one_nor_email(
    namespace: str,
    quick_webhooks: Any,
    receivers: dict[str, Receiver],
    smtp: Inbox,
    request: pytest.FixtureRequest,
) -> None:
    quick_webhooks.CONSOLE_WEBHOOK_TIMEOUT = DEADLINE
    quick_webhooks.CONSOLE_WEBHOOK_BACKOFF_SECONDS = 600  # each message tried once here
    quick_webhooks.CONSOLE_WEBHOOK_BACKOFF_MAX_SECONDS = 600
    endpoints = {name: hook(receiver, namespace) for name, receiver in receivers.items()}
    person(namespace, "supervisor", email=SUPERVISOR)
    author = person(namespace, "operator")
    first = propose(author, namespace)
    # A worker that died mid-attempt holds the first message to the healthy receiver under a
    # lease that has run out by now.
    held = WebhookMessage.objects.get(endpoint=endpoints["healthy"])
    assert delivery.claim(held, timezone.now() - delivery.lease() - timedelta(seconds=1))

    request.getfixturevalue("running_worker")
    assert wait_for(lambda: receivers["dripping"].requests and receivers["hanging"].requests, 30)
    # While the dripping and the hanging receivers hold their attempts, something new to tell.
    second = propose(author, namespace)

    healthy = receivers["healthy"]

    def mailed_here() -> list[float]:
        """When this test's emails came (the worker also sends what earlier tests left)."""
        return [
            at
            for message, at in zip(smtp.messages, smtp.received_at, strict=True)
            if message["To"] == SUPERVISOR
        ]

    assert wait_for(lambda: len(healthy.verified) == 2 and len(mailed_here()) == 2, 30)
    assert wait_for(
        lambda: all(
            the_try(endpoints[name], first.id).finished_at is not None
            for name in ("dripping", "hanging")
        ),
        30,
    )
    drip = the_try(endpoints["dripping"], first.id)
    hang = the_try(endpoints["hanging"], first.id)

    # The second message to the healthy receiver and its email went out while the first
    # dripping attempt was still under way: nobody waited for it.
    second_healthy = the_try(endpoints["healthy"], second.id)
    assert drip.finished_at is not None and second_healthy.finished_at is not None
    assert second_healthy.finished_at < drip.finished_at
    assert max(mailed_here()) < drip.finished_at.timestamp()
    # Each slow attempt was cut off at its deadline, for all of it: the dripping answer would
    # have gone on for 20 s, each of its reads answered within 0.2 s.
    assert drip.seconds is not None and DEADLINE <= drip.seconds < DEADLINE + 2
    assert "deadline" in drip.error and "status 200 came" in drip.error
    assert hang.seconds is not None and DEADLINE <= hang.seconds < DEADLINE + 2
    assert "deadline" in hang.error
    assert wait_for(lambda: receivers["dripping"].cut_off >= 1, 10)  # we hung up on it
    # The lease that had run out was taken over: tried again under the same webhook-id.
    held.refresh_from_db()
    assert held.state == MessageState.DELIVERED and held.attempts == 2
    tries = list(held.tries.values_list("number", "finished_at", "response_code"))
    assert [(n, code) for n, _, code in tries] == [(1, None), (2, 204)]
    assert tries[0][1] is None  # the dead worker's try: no answer recorded
    assert sorted(healthy.verified) == sorted(
        WebhookMessage.objects.filter(endpoint=endpoints["healthy"]).values_list("id", flat=True)
    )
    assert not healthy.duplicates and not healthy.bad_signatures
    for name in ("dripping", "hanging"):
        for message in WebhookMessage.objects.filter(endpoint=endpoints[name]):
            assert message.state == MessageState.PENDING and message.response_code is None
            assert "deadline" in message.last_error


def test_an_endpoint_with_a_backlog_takes_its_share_and_the_others_are_found_behind_it(
    namespace: str, quick_webhooks: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At most ``CONSOLE_WEBHOOK_ENDPOINT_CONCURRENCY`` attempts to one endpoint at a time,
    counting those under way; messages to other endpoints queued behind its backlog are
    claimed in the same round, however long the backlog (here longer than a page of rows)."""
    quick_webhooks.CONSOLE_WEBHOOK_ENDPOINT_CONCURRENCY = 2
    monkeypatch.setattr(delivery, "DUE_ROWS", 3)
    author = person(namespace, "operator")
    person(namespace, "supervisor")
    busy, _ = webhooks.endpoint_add(
        namespace_id=namespace, url="http://127.0.0.1:9/busy", event_types=[]
    )
    for _ in range(5):
        propose(author, namespace)
    other, _ = webhooks.endpoint_add(
        namespace_id=namespace, url="http://127.0.0.1:9/other", event_types=[]
    )
    for _ in range(3):
        propose(author, namespace)
    now = timezone.now()

    def claim(**options: Any) -> Counter[str]:
        claims = delivery.claim_due(now, **{"slots": 32, "in_flight": {}, **options})
        return Counter(out.endpoint_id for out in claims.outs)

    assert claim() == {busy.id: 2, other.id: 2}
    # One of each under way: the busy endpoint has one slot left, the other one too.
    assert claim(in_flight={busy.id: 1, other.id: 1}) == {busy.id: 1, other.id: 1}
    # The other endpoint is done; the busy one's other messages wait for a slot of its own.
    assert claim(in_flight={busy.id: 2}) == {}
    assert claim(in_flight={busy.id: 2}, endpoint_id=busy.id) == {}
    # A slot of its own freed: one more of its messages, and nothing of another endpoint.
    assert claim(in_flight={busy.id: 1}, endpoint_id=busy.id) == {busy.id: 1}
    # No more than the free slots: eight messages to the busy endpoint, five taken now.
    assert claim(slots=1) == {busy.id: 1}
    assert claim() == {busy.id: 2}
    assert claim() == {busy.id: 1}
    assert claim() == {}


def test_a_freed_slot_is_filled_at_once_without_waiting_for_a_poll(
    namespace: str, quick_webhooks: Any, receivers: dict[str, Receiver]
) -> None:
    """A backlog to one endpoint drains through its few slots, each refilled as its attempt
    ends (here the worker would poll only once a minute)."""
    quick_webhooks.CONSOLE_WEBHOOK_ENDPOINT_CONCURRENCY = 2
    healthy = receivers["healthy"]
    hook(healthy, namespace)
    author = person(namespace, "operator")
    person(namespace, "supervisor")
    for _ in range(20):
        propose(author, namespace)
    stop = threading.Event()
    thread = threading.Thread(target=worker.run, kwargs={"interval": 60, "stop": stop})
    thread.start()
    try:
        assert wait_for(lambda: len(healthy.verified) == 20, 30), len(healthy.verified)
    finally:
        stop.set()
        wakeup.wake()
        thread.join(timeout=30)
    assert not healthy.duplicates and not healthy.bad_signatures
