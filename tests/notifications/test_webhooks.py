"""Webhooks against a real receiver (issue 32): every request verified by the
``standardwebhooks`` library and deduplicated on ``webhook-id``; faults end with every
notification delivered once or visibly failed."""

import time
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.utils import timezone

from orbit_console.notifications import ssrf, webhooks
from orbit_console.notifications.models import Endpoint, MessageState, WebhookMessage
from tests.notifications.conftest import person, propose
from tests.support.receivers import Receiver, Reply


def hook(receiver: Receiver, namespace: str, **options: Any) -> Endpoint:
    endpoint, secret = webhooks.endpoint_add(
        namespace_id=namespace, url=receiver.url, **{"event_types": [], **options}
    )
    receiver.secrets.append(secret)
    return endpoint


def deliver_until_settled(endpoint: Endpoint, *, passes: int = 20) -> list[WebhookMessage]:
    with webhooks.new_client() as client:
        for _ in range(passes):
            webhooks.deliver_due(client, now=timezone.now() + timedelta(hours=1))
            messages = list(WebhookMessage.objects.filter(endpoint=endpoint))
            if all(m.state != MessageState.PENDING for m in messages):
                return messages
    return list(WebhookMessage.objects.filter(endpoint=endpoint))


def test_a_waiting_proposal_reaches_the_receiver_signed_with_its_id(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    endpoint = hook(receiver, namespace)
    person(namespace, "supervisor")
    proposal = propose(person(namespace, "operator"), namespace)

    [message] = deliver_until_settled(endpoint)

    assert message.state == MessageState.DELIVERED and message.response_code == 204
    payload = receiver.verified[message.id]
    assert payload["type"] == "proposal.waiting"
    assert payload["data"]["proposal_id"] == proposal.id
    assert payload["data"]["link"].endswith(f"/proposals/{proposal.id}")
    assert "INC-1" not in str(payload) and "checked" not in str(payload)  # no body (E2)
    assert receiver.bad_signatures == 0


def test_event_types_choose_what_an_endpoint_hears(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    only_rejections = hook(receiver, namespace, event_types=["proposal.rejected"])
    everything = hook(receiver, namespace)
    elsewhere = hook(receiver, f"{namespace}-other")
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)

    assert WebhookMessage.objects.filter(endpoint=everything).count() == 1
    assert not WebhookMessage.objects.filter(endpoint__in=[only_rejections, elsewhere]).exists()


def test_a_slack_endpoint_gets_text_and_blocks(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    endpoint = hook(receiver, namespace, fmt="slack")
    person(namespace, "supervisor")
    proposal = propose(person(namespace, "operator"), namespace)

    [message] = deliver_until_settled(endpoint)

    payload = receiver.verified[message.id]
    assert "A proposal waits for your approval" in payload["text"]
    assert payload["blocks"][0]["type"] == "section"
    assert f"/proposals/{proposal.id}|" in payload["blocks"][0]["text"]["text"]


def test_during_a_rotation_both_secrets_verify(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    endpoint = hook(receiver, namespace)
    old = receiver.secrets.pop()
    new = webhooks.endpoint_rotate(endpoint_id=endpoint.id)
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)
    message = WebhookMessage.objects.get(endpoint=endpoint)
    headers = webhooks.signature_headers(
        Endpoint.objects.get(id=endpoint.id), message.id, timezone.now(), message.body
    )
    from standardwebhooks.webhooks import Webhook

    for secret in (old, new):
        Webhook(secret).verify(message.body, headers)
    webhooks.endpoint_end_rotation(endpoint_id=endpoint.id)
    headers = webhooks.signature_headers(
        Endpoint.objects.get(id=endpoint.id), message.id, timezone.now(), message.body
    )
    Webhook(new).verify(message.body, headers)
    with pytest.raises(Exception, match="No matching signature"):
        Webhook(old).verify(message.body, headers)


def test_500_then_429_with_retry_after_then_success_is_delivered_once(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    replies = {1: Reply(500), 2: Reply(429, {"Retry-After": "120"})}
    receiver.script = lambda n: replies.get(n, Reply(200))
    endpoint = hook(receiver, namespace)
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)

    with webhooks.new_client() as client:
        webhooks.deliver_due(client)
        webhooks.deliver_due(client, now=timezone.now() + timedelta(seconds=5))
        message = WebhookMessage.objects.get(endpoint=endpoint)
        assert message.response_code == 429 and message.attempts == 2
        # Retry-After: 120 is honoured although the backoff alone would try at once.
        assert message.next_at > timezone.now() + timedelta(seconds=100)
        webhooks.deliver_due(client, now=timezone.now() + timedelta(seconds=60))
        assert WebhookMessage.objects.get(endpoint=endpoint).attempts == 2
    [message] = deliver_until_settled(endpoint)
    assert message.state == MessageState.DELIVERED and message.attempts == 3
    assert list(receiver.verified) == [message.id] and not receiver.duplicates


def test_410_disables_the_endpoint_and_fails_what_it_was_owed(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    receiver.script = lambda n: Reply(410)
    endpoint = hook(receiver, namespace)
    person(namespace, "supervisor")
    author = person(namespace, "operator")
    propose(author, namespace)
    propose(author, namespace)

    messages = deliver_until_settled(endpoint)

    assert receiver.requests == 1
    assert {m.state for m in messages} == {MessageState.FAILED}
    endpoint.refresh_from_db()
    assert not endpoint.active and "410" in endpoint.disabled_reason
    assert any(m.response_code == 410 for m in messages)


def test_a_slow_receiver_is_timed_out_and_tried_again_under_the_same_id(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    # The first answer comes after the 1 s read timeout: the receiver got it, we do not know.
    receiver.script = lambda n: Reply(204, delay=2.5 if n == 1 else 0)
    endpoint = hook(receiver, namespace)
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)

    started = time.monotonic()
    [message] = deliver_until_settled(endpoint)

    assert time.monotonic() - started < 2.5
    assert message.state == MessageState.DELIVERED and message.attempts == 2
    time.sleep(2)  # the slow first request ends at the receiver too
    assert list(receiver.verified) == [message.id] and receiver.duplicates == [message.id]


def test_a_receiver_that_is_down_fails_visibly_after_the_last_try(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    endpoint = hook(receiver, namespace)
    receiver.stop()
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)

    [message] = deliver_until_settled(endpoint)

    assert message.state == MessageState.FAILED and message.attempts == 4
    assert "ConnectError" in message.last_error and message.response_code is None


def test_500_every_time_fails_visibly_after_the_last_try(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    receiver.script = lambda n: Reply(500)
    endpoint = hook(receiver, namespace)
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)

    [message] = deliver_until_settled(endpoint)

    assert message.state == MessageState.FAILED and message.response_code == 500
    assert receiver.requests == 4 and not receiver.verified


def test_a_process_killed_mid_delivery_sends_again_under_the_same_id(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    endpoint = hook(receiver, namespace)
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)
    message = WebhookMessage.objects.get(endpoint=endpoint)
    # The worker claimed it and sent it, then died before it could record the answer.
    assert webhooks.claim(message, timezone.now())
    with httpx.Client() as client:
        webhooks.send(client, message, timezone.now())
    assert list(receiver.verified) == [message.id]
    assert WebhookMessage.objects.get(id=message.id).state == MessageState.PENDING

    [again] = deliver_until_settled(endpoint)  # after the claim's lease

    assert again.state == MessageState.DELIVERED and again.attempts == 2
    assert receiver.duplicates == [message.id]  # the receiver dropped it: same webhook-id
    assert len(receiver.verified) == 1


def test_replay_sends_the_same_message_again(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    endpoint = hook(receiver, namespace)
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)
    [message] = deliver_until_settled(endpoint)

    webhooks.replay(message_id=message.id)
    [again] = deliver_until_settled(endpoint)

    assert again.id == message.id and again.state == MessageState.DELIVERED
    assert receiver.duplicates == [message.id]


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:9/hook",
        "http://localhost/x",
        "http://169.254.169.254/latest",
        "http://10.1.2.3/x",
        "http://[::1]/x",
        "ftp://example.com/x",
    ],
)
def test_private_loopback_and_link_local_addresses_are_refused(url: str, settings: Any) -> None:
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = []
    with pytest.raises(ssrf.Forbidden):
        ssrf.check_url(url)


def test_an_administrator_may_allow_a_network(settings: Any) -> None:
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    ssrf.check_url("http://127.0.0.1:9/hook")
    with pytest.raises(ssrf.Forbidden):
        ssrf.check_url("http://10.1.2.3/x")
