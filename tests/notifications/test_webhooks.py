"""Webhooks against a real receiver (issue 32): every request verified by the
``standardwebhooks`` library and deduplicated on ``webhook-id``; faults end with every
notification delivered once or visibly failed."""

import asyncio
import re
import time
from datetime import datetime, timedelta
from io import StringIO
from typing import Any

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from django.utils import timezone

from orbit_console.decisions.proposals import proposal_reject
from orbit_console.ledger.lifecycle import namespace_create
from orbit_console.lib.ids import new_id
from orbit_console.notifications import delivery, ssrf, webhooks, worker
from orbit_console.notifications.models import Endpoint, MessageState, WebhookMessage
from tests.notifications.conftest import person, propose, wait_for
from tests.support.receivers import Receiver, Reply


def hook(receiver: Receiver, namespace: str, **options: Any) -> Endpoint:
    endpoint, secret = webhooks.endpoint_add(
        namespace_id=namespace, url=receiver.url, **{"event_types": [], **options}
    )
    receiver.secrets.append(secret)
    return endpoint


def later(**delta: float) -> Any:
    """A clock ahead of time: what a backoff put off is due."""
    return lambda: timezone.now() + timedelta(**delta)


def deliver_until_settled(endpoint: Endpoint, *, passes: int = 20) -> list[WebhookMessage]:
    for _ in range(passes):
        worker.deliver_once(clock=later(hours=1))
        messages = list(WebhookMessage.objects.filter(endpoint=endpoint))
        if all(m.state != MessageState.PENDING for m in messages):
            return messages
    return list(WebhookMessage.objects.filter(endpoint=endpoint))


def send_without_recording(message: WebhookMessage, at: datetime) -> delivery.Answer:
    """What a worker killed after its attempt leaves: the try claimed and made, not recorded."""
    assert delivery.claim(message, at)
    out = delivery.outgoing(message, at)

    async def send() -> delivery.Answer:
        async with delivery.new_client() as client:
            return await delivery.attempt(client, out)

    return asyncio.run(send())


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

    worker.deliver_once()
    worker.deliver_once(clock=later(seconds=5))
    message = WebhookMessage.objects.get(endpoint=endpoint)
    assert message.response_code == 429 and message.attempts == 2
    # Retry-After: 120 is honoured although the backoff alone would try at once.
    assert message.next_at > timezone.now() + timedelta(seconds=100)
    worker.deliver_once(clock=later(seconds=60))
    assert WebhookMessage.objects.get(endpoint=endpoint).attempts == 2
    [message] = deliver_until_settled(endpoint)
    assert message.state == MessageState.DELIVERED and message.attempts == 3
    assert list(receiver.verified) == [message.id] and not receiver.duplicates


def test_410_disables_the_endpoint_and_fails_what_it_was_owed(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    # One at a time: the attempts already under way when the 410 comes are still made.
    quick_webhooks.CONSOLE_WEBHOOK_ENDPOINT_CONCURRENCY = 1
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
    # The slow first request ends at the receiver too, which drops it by its webhook-id.
    assert wait_for(lambda: receiver.duplicates == [message.id], 10)
    assert list(receiver.verified) == [message.id]


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
    send_without_recording(message, timezone.now())
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


@pytest.mark.parametrize(
    "url",
    [
        "http://[64:ff9b::a9fe:a9fe]/latest",  # NAT64 (RFC 6052) of 169.254.169.254
        "http://[64:ff9b::7f00:1]/x",  # NAT64 of 127.0.0.1
        "http://[2002:a9fe:a9fe::1]/x",  # 6to4 of 169.254.169.254
        "http://[2002:0a01:0203::1]/x",  # 6to4 of 10.1.2.3
        "http://[::7f00:1]/x",  # IPv4-compatible 127.0.0.1
        "http://[::127.0.0.1]/x",
        "http://[::ffff:0:a9fe:a9fe]/x",  # IPv4-translated (SIIT)
        "http://[::ffff:169.254.169.254]/x",  # IPv4-mapped
        "http://[64:ff9b:1::808:808]/x",  # NAT64 local-use: where its IPv4 address sits varies
        "http://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/x",  # Teredo
    ],
)
def test_ipv4_addresses_in_ipv6_clothing_are_judged_by_where_they_lead(
    url: str, settings: Any
) -> None:
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = []
    with pytest.raises(ssrf.Forbidden):
        ssrf.check_url(url)


def test_public_addresses_behind_nat64_and_6to4_stay_reachable(settings: Any) -> None:
    """An IPv6-only cluster reaches public receivers through NAT64: that must keep working."""
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = []
    ssrf.check_url("http://[64:ff9b::808:808]/hook")  # 8.8.8.8
    ssrf.check_url("http://[2002:808:808::1]/hook")
    ssrf.check_url("https://[2001:4860:4860::8888]/hook")
    # An administrator's allowed network covers the IPv4 address it leads to.
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = ["10.20.0.0/16"]
    ssrf.check_url("http://[64:ff9b::a14:1]/relay")  # 10.20.0.1
    with pytest.raises(ssrf.Forbidden):
        ssrf.check_url("http://[64:ff9b::a15:1]/relay")  # 10.21.0.1


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("http://x:99999/", "port 99999"),
        ("http://x:-1/", "port -1"),
        ("http://[::1/", "not a valid URL"),
        ("http://example.com/\n", "not a valid URL"),
        ("http://" + "a" * 600 + ".example/", "at most 500 characters"),
    ],
)
def test_a_url_that_is_no_url_is_refused_with_its_reason(live_db: None, url: str, why: str) -> None:
    # A namespace of the embedded ledger: ``notify webhook add`` takes no other.
    namespace = namespace_create(name=f"webhooks {new_id()}")[0].id
    with pytest.raises(CommandError, match=re.escape(why)):
        call_command("notify", "webhook", "add", namespace, url)
    assert not Endpoint.objects.filter(namespace_id=namespace).exists()


def test_a_redirect_fails_at_once_and_says_why(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    """Redirects are never followed: trying again for eleven hours would change nothing."""
    receiver.script = lambda n: Reply(302, {"Location": "https://elsewhere.example/hook"})
    endpoint = hook(receiver, namespace)
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)

    worker.deliver_once()

    message = WebhookMessage.objects.get(endpoint=endpoint)
    assert message.state == MessageState.FAILED and message.attempts == 1
    assert message.response_code == 302 and message.next_at is None
    assert "redirect" in message.last_error and "https://elsewhere.example/hook" in (
        message.last_error
    )
    assert receiver.requests == 1


def test_the_delivery_log_keeps_every_try(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    replies = {1: Reply(500), 2: Reply(429)}
    receiver.script = lambda n: replies.get(n, Reply(204))
    endpoint = hook(receiver, namespace)
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)

    [message] = deliver_until_settled(endpoint)

    tries = list(message.tries.order_by("number"))
    assert [(t.number, t.response_code) for t in tries] == [(1, 500), (2, 429), (3, 204)]
    assert all(t.finished_at is not None and t.finished_at >= t.started_at for t in tries)
    out = StringIO()
    call_command("notify", "webhook", "log", endpoint.id, stdout=out)
    lines = out.getvalue().splitlines()
    assert [line.split()[:2] for line in lines[1:]] == [["try", "1"], ["try", "2"], ["try", "3"]]
    assert "code=500" in lines[1] and "code=429" in lines[2] and "code=204" in lines[3]
    administrator = person(namespace)
    administrator.is_staff = True
    administrator.save()
    client = Client()
    client.force_login(administrator)
    page = client.get(f"/notifications/deliveries?endpoint={endpoint.id}").content.decode()
    shown = re.findall(r'<li value="(\d)">[^<]*<time[^>]*>[^<]*</time>: (\d+)', page)
    assert shown == [("1", "500"), ("2", "429"), ("3", "204")]


def test_a_reason_with_line_breaks_forges_no_line_in_a_slack_message(
    namespace: str, quick_webhooks: Any, receiver: Receiver
) -> None:
    endpoint = hook(receiver, namespace, fmt="slack")
    supervisor = person(namespace, "supervisor")
    proposal = propose(person(namespace, "operator"), namespace)
    forged = "evidence is stale\nBy: the-auditor\r\nReason: approved\u2028Task: none"
    proposal_reject(proposal_id=proposal.id, supervisor=supervisor, reason=forged)

    messages = deliver_until_settled(endpoint)

    [payload] = [
        receiver.verified[m.id] for m in messages if m.notification.kind == "proposal.rejected"
    ]
    lines = payload["blocks"][1]["text"]["text"].splitlines()
    assert [line for line in lines if line.startswith("By:")] == [
        f"By: {supervisor.get_username()}"
    ]
    assert [line for line in lines if line.startswith(("Reason:", "Task:"))] == [
        f"Task: {proposal.task_id}",
        "Reason: evidence is stale By: the-auditor Reason: approved Task: none",
    ]
