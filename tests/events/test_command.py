"""``manage.py events``: subscriptions of the embedded API made, listed and deleted by its
operator (docs/events.md); what is owed follows from the ledger's writes as over the API."""

import io
from typing import Any

import httpx
import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from orbit_console.events.models import Delivery, Subscription
from orbit_console.ledger.lifecycle import credential_issue
from orbit_console.ledger.models import Credential, Queue
from orbit_console.lib.ids import new_id
from tests.events.test_stream import accept
from tests.support.orbit import bearer


def events(*args: str) -> str:
    out = io.StringIO()
    call_command("events", *args, stdout=out)
    return out.getvalue()


def test_a_subscription_made_by_the_command_is_owed_its_queues_events(
    world: dict[str, Any],
) -> None:
    subscription_id = events(
        "subscribe",
        "--namespace",
        world["namespace_id"],
        "--name",
        "operator's feed",
        "--queue",
        world["queue_id"],
        "--lease-ms",
        "5000",
    ).strip()
    subscription = Subscription.objects.get(id=subscription_id)
    assert (subscription.queues, subscription.lease_ms) == ({world["queue_id"]}, 5000)
    task = accept(world, "command")
    owed = Delivery.objects.filter(subscription_id=subscription_id)
    assert owed.count() == 1
    listed = events("list", "--namespace", world["namespace_id"])
    assert (
        f"{subscription_id} {world['namespace_id']} {world['queue_id']} lease 5000 ms, owed 1"
        in (listed)
    )
    assert task.id  # the event owed is the task's acceptance
    assert events("delete", subscription_id).strip() == f"deleted {subscription_id}"
    assert not Subscription.objects.filter(id=subscription_id).exists()
    assert not owed.exists()


def test_the_command_refuses_what_the_api_refuses(world: dict[str, Any]) -> None:
    before = Subscription.objects.count()
    with pytest.raises(CommandError, match="lease_ms"):
        events("subscribe", "--namespace", world["namespace_id"], "--name", "x", "--lease-ms", "5")
    with pytest.raises(CommandError, match="queue of the namespace"):
        events(
            "subscribe", "--namespace", world["namespace_id"], "--name", "x", "--queue", new_id()
        )
    with pytest.raises(CommandError, match="no namespace"):
        events("subscribe", "--namespace", new_id(), "--name", "x")
    with pytest.raises(CommandError, match="no subscription"):
        events("delete", new_id())
    assert Subscription.objects.count() == before


def test_the_command_gives_a_subscription_to_the_credential_it_names(
    world: dict[str, Any], stream_api: httpx.Client
) -> None:
    """Issue 29: a subscription has an owner. The operator names it (``--credential``), beyond
    the API's limits; without one, no credential sees the subscription."""
    owner = Credential.objects.get(namespace_id=world["namespace_id"], actor_name="subscriber")
    namespace = ("--namespace", world["namespace_id"], "--name")
    given = events("subscribe", *namespace, "given", "--credential", owner.id).strip()
    nobodys = events("subscribe", *namespace, "nobody's").strip()
    token = world["tokens"]["subscriber"]
    assert stream_api.get(f"/v1/subscriptions/{given}", headers=bearer(token)).status_code == 200
    assert stream_api.get(f"/v1/subscriptions/{nobodys}", headers=bearer(token)).status_code == 404
    listed = events("list", "--namespace", world["namespace_id"])
    assert f"owner {owner.id}: given" in listed and "owner -: nobody's" in listed
    reader = Credential.objects.get(namespace_id=world["namespace_id"], actor_name="reader")
    reports = Queue.objects.get(namespace_id=world["namespace_id"], name="reports")
    limited, _ = credential_issue(
        namespace=reports.namespace,
        actor_name="reports-only",
        permissions=["events:subscribe"],
        queues=[reports],
    )
    with pytest.raises(CommandError, match="lacks the events:subscribe"):
        events("subscribe", *namespace, "x", "--credential", reader.id)
    with pytest.raises(CommandError, match="no credential"):
        events("subscribe", *namespace, "x", "--credential", new_id())
    with pytest.raises(CommandError, match="limited to some queues"):
        events("subscribe", *namespace, "x", "--credential", limited.id)
