"""``manage.py notify``: the delivery worker and the webhook endpoints (docs/notifications.md).

notify deliver [--once] [--interval S] [--health-port PORT]
notify webhook add NAMESPACE URL [--events KIND ...] [--format json|slack] [--language L]
notify webhook list [--namespace NAMESPACE]
    NAMESPACE: an id or an exact name (lib/namespaces.py); an endpoint kept under a namespace
    the console does not know (a name kept as the id, before issue 41) hears nothing: list
    marks it
notify webhook rotate ID | end-rotation ID | enable ID | disable ID | remove ID
notify webhook log ID [--limit N]
notify webhook replay MESSAGE_ID
"""

import signal
import threading
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from orbit_console.lib.namespaces import NamespaceNotFound
from orbit_console.notifications import wakeup, webhooks, worker
from orbit_console.notifications.kinds import KINDS
from orbit_console.notifications.models import Endpoint, WebhookMessage
from orbit_console.ops.loops import Heartbeat, serve_health
from orbit_console.people.namespaces import id_of_namespace, known_namespaces

UNKNOWN = (
    "UNKNOWN NAMESPACE: hears nothing; add it again by the namespace's id or name, remove this"
)


class Command(BaseCommand):
    help = "Deliver notifications, and manage webhook endpoints."

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="command", required=True)
        deliver = sub.add_parser("deliver", help="run the delivery worker")
        deliver.add_argument("--once", action="store_true")
        deliver.add_argument("--interval", type=float, default=1.0)
        deliver.add_argument(
            "--health-port",
            type=int,
            default=0,
            help="answer /health/live, /health/ready and /metrics on this port (ops/loops.py)",
        )
        hook = sub.add_parser("webhook", help="manage webhook endpoints")
        verbs = hook.add_subparsers(dest="verb", required=True)
        add = verbs.add_parser("add")
        add.add_argument("namespace", help="an id or an exact name")
        add.add_argument("url")
        add.add_argument("--events", nargs="*", default=[], choices=sorted(KINDS))
        add.add_argument("--format", default="json", choices=["json", "slack"])
        add.add_argument("--language", default="")
        listing = verbs.add_parser("list")
        listing.add_argument("--namespace", default=None, help="an id or an exact name")
        for verb in ("rotate", "end-rotation", "enable", "disable", "remove"):
            verbs.add_parser(verb).add_argument("id")
        log = verbs.add_parser("log")
        log.add_argument("id")
        log.add_argument("--limit", type=int, default=50)
        verbs.add_parser("replay").add_argument("message_id")

    def handle(self, *args: Any, **options: Any) -> None:
        if options["command"] == "deliver":
            self._deliver(options)
        else:
            self._webhook(options)

    def _deliver(self, options: dict[str, Any]) -> None:
        stop = threading.Event()

        def stopping(*_: object) -> None:
            stop.set()
            wakeup.wake()

        signal.signal(signal.SIGTERM, stopping)
        signal.signal(signal.SIGINT, stopping)
        interval = options["interval"]
        # Stalled once no pass has succeeded for longer than the pause after failed passes
        # allows (worker.MAX_BACKOFF), with room for two passes.
        heartbeat = Heartbeat("notifier", stale_after=worker.MAX_BACKOFF + 2 * interval)
        if options["health_port"]:
            serve_health(heartbeat, options["health_port"])
        worker.run(interval=interval, stop=stop, once=options["once"], heartbeat=heartbeat)

    def _webhook(self, options: dict[str, Any]) -> None:
        verb = options["verb"]
        try:
            if verb == "add":
                endpoint, secret = webhooks.endpoint_add(
                    namespace_id=id_of_namespace(options["namespace"]),
                    url=options["url"],
                    event_types=options["events"],
                    fmt=options["format"],
                    language=options["language"],
                )
                self.stdout.write(f"{endpoint.id}\n{secret}")
            elif verb == "list":
                self._list(options["namespace"])
            elif verb == "rotate":
                self.stdout.write(webhooks.endpoint_rotate(endpoint_id=self._id(options)))
            elif verb == "end-rotation":
                webhooks.endpoint_end_rotation(endpoint_id=self._id(options))
            elif verb == "enable":
                webhooks.endpoint_enable(endpoint_id=self._id(options))
            elif verb == "disable":
                webhooks.endpoint_disable(
                    endpoint_id=self._id(options), reason="by an administrator"
                )
            elif verb == "remove":
                Endpoint.objects.filter(id=self._id(options)).delete()
            elif verb == "log":
                messages = WebhookMessage.objects.filter(endpoint_id=self._id(options))
                messages = messages.select_related("notification").prefetch_related("tries")
                for m in messages.order_by("-created_at")[: options["limit"]]:
                    self.stdout.write(
                        f"{m.id} {m.notification.kind} {m.state} attempts={m.attempts} "
                        f"next={m.next_at.isoformat() if m.next_at else '-'} "
                        f"code={m.response_code or '-'} {m.last_error}"
                    )
                    for t in m.tries.all():
                        took = f"{t.seconds:.3f}s" if t.seconds is not None else "unrecorded"
                        self.stdout.write(
                            f"  try {t.number} {t.started_at.isoformat()} {took} "
                            f"code={t.response_code or '-'} {t.error}"
                        )
            elif verb == "replay":
                message = webhooks.replay(message_id=options["message_id"])
                self.stdout.write(f"{message.id} pending")
        except (webhooks.EndpointRefused, WebhookMessage.DoesNotExist) as error:
            raise CommandError(str(error)) from error

    def _list(self, typed: str | None) -> None:
        """The endpoints (of the namespace named, and any kept under the very text typed),
        each marked when the console knows no namespace it is kept under: it hears nothing.
        A namespace unknown is an error, after what is kept under its text."""
        known = known_namespaces()
        endpoints = Endpoint.objects.order_by("namespace_id", "created_at")
        unknown = None
        if typed is not None:
            try:
                endpoints = endpoints.filter(namespace_id__in={known.id_of(typed), typed})
            except NamespaceNotFound as error:
                endpoints, unknown = endpoints.filter(namespace_id=typed), error
        for e in endpoints:
            state = "active" if e.active else f"disabled ({e.disabled_reason})"
            rotating = " rotating" if e.previous_secret_sealed else ""
            kinds = e.event_types or "*"
            stray = "" if e.namespace_id in known else f"  [{UNKNOWN}]"
            self.stdout.write(
                f"{e.id} {e.namespace_id} {e.url} {e.format} {kinds} {state}{rotating}{stray}"
            )
        if unknown is not None:
            raise unknown

    def _id(self, options: dict[str, Any]) -> str:
        endpoint_id: str = options["id"]
        if not Endpoint.objects.filter(id=endpoint_id).exists():
            raise CommandError(f"no webhook endpoint {endpoint_id}")
        return endpoint_id
