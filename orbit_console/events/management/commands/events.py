"""``manage.py events``: the embedded API's event-stream subscriptions (docs/events.md), for
the operator of the embedded ledger (over the API: ``/v1/subscriptions``).

events subscribe --namespace ID|NAME --name TEXT [--queue ID]... [--lease-ms N] [--credential ID]
    prints the new subscription's id; ``--credential``: the credential that owns it (lists,
    reads, streams and deletes it over the API); without it, no credential sees it
events list [--namespace ID|NAME]
    the subscriptions, with how many events each is owed
events delete ID
"""

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Count

from orbit_console.events.models import Delivery, Subscription
from orbit_console.events.subscriptions import (
    DEFAULT_LEASE_MS,
    parse_subscription,
    subscription_insert,
)
from orbit_console.ledger.auth import queue_scope
from orbit_console.ledger.errors import InvalidArgument
from orbit_console.ledger.lifecycle import actor_id_for, namespace_named
from orbit_console.ledger.models import Credential, Namespace, Permission, Queue
from orbit_console.lib.ids import new_id

COMMAND_ACTOR = "manage.py events"


class Command(BaseCommand):
    help = "Manage the embedded API's event-stream subscriptions."

    def add_arguments(self, parser: CommandParser) -> None:
        commands = parser.add_subparsers(dest="command", required=True)
        subscribe = commands.add_parser("subscribe", help="create a subscription")
        subscribe.add_argument("--namespace", required=True, help="an id or an exact name")
        subscribe.add_argument("--name", required=True)
        subscribe.add_argument("--queue", action="append", default=[], help="only this queue")
        subscribe.add_argument("--lease-ms", type=int, default=DEFAULT_LEASE_MS)
        subscribe.add_argument(
            "--credential", default="", help="the id of the credential that owns it"
        )
        listing = commands.add_parser("list", help="the subscriptions")
        listing.add_argument("--namespace", default="", help="an id or an exact name")
        delete = commands.add_parser("delete", help="delete a subscription and what it is owed")
        delete.add_argument("id")

    def handle(self, *args: Any, **options: Any) -> None:
        command = options["command"]
        if command == "subscribe":
            self._subscribe(options)
        elif command == "list":
            self._list(options["namespace"])
        else:
            deleted, _ = Subscription.objects.filter(id=options["id"]).delete()
            if not deleted:
                raise CommandError(f"no subscription {options['id']}")
            Delivery.objects.filter(subscription_id=options["id"]).delete()
            self.stdout.write(f"deleted {options['id']}")

    def _subscribe(self, options: dict[str, Any]) -> None:
        namespace = namespace_named(options["namespace"])
        body: dict[str, Any] = {"name": options["name"], "lease_ms": options["lease_ms"]}
        if options["queue"]:
            body["queue_ids"] = options["queue"]
        try:
            request = parse_subscription(json.dumps(body).encode())
        except InvalidArgument as refused:
            raise CommandError(refused.message) from None
        found = Queue.objects.filter(namespace=namespace, id__in=request.queue_ids).count()
        if found != len(request.queue_ids):
            raise CommandError("every --queue must be a queue of the namespace")
        owner = self._owner(namespace, options["credential"], request.queue_ids)
        # The operator's command is not held to the API's limits on subscriptions: it is how
        # an operator gives a credential one beyond them.
        subscription = subscription_insert(
            namespace_id=namespace.id,
            credential_id=owner.id if owner else "",
            request=request,
            actor_id=owner.actor_id if owner else actor_id_for(namespace.id, COMMAND_ACTOR),
            key_digest=f"command-{new_id()}",
        )
        self.stdout.write(subscription.id)

    @staticmethod
    def _owner(
        namespace: Namespace, credential_id: str, queue_ids: tuple[str, ...]
    ) -> Credential | None:
        """The credential that will own the subscription: one of the namespace that may
        subscribe, and whose queues hold the subscription's (else it could not see it)."""
        if not credential_id:
            return None
        owner = Credential.objects.filter(id=credential_id, namespace=namespace).first()
        if owner is None:
            raise CommandError(f"no credential {credential_id} in the namespace")
        if Permission.SUBSCRIBE not in owner.permission_set:
            raise CommandError(f"the credential lacks the {Permission.SUBSCRIBE} permission")
        scope = queue_scope(owner)
        if scope is not None and not (queue_ids and set(queue_ids) <= scope):
            raise CommandError("the credential is limited to some queues: name them (or some)")
        return owner

    def _list(self, named: str) -> None:
        subscriptions = Subscription.objects.order_by("namespace_id", "created_at")
        if named:
            subscriptions = subscriptions.filter(namespace_id=namespace_named(named).id)
        owed = dict(
            Delivery.objects.values_list("subscription_id")
            .annotate(n=Count("id"))
            .values_list("subscription_id", "n")
        )
        for subscription in subscriptions:
            queues = ",".join(sorted(subscription.queues)) or "*"
            owner = subscription.credential_id or "-"
            self.stdout.write(
                f"{subscription.id} {subscription.namespace_id} {queues} "
                f"lease {subscription.lease_ms} ms, owed {owed.get(subscription.id, 0)}, "
                f"owner {owner}: {subscription.name}"
            )
