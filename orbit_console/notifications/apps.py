from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "orbit_console.notifications"
    label = "notifications"
    verbose_name = "Orbit Console: notifications (outbox, in-console, webhooks, email)"

    def ready(self) -> None:
        from orbit_console.decisions.submissions import listen_to_records
        from orbit_console.ledger.api.openapi import document_webhooks
        from orbit_console.notifications.outbox import on_record
        from orbit_console.notifications.schema import openapi_webhooks

        # Told of every entry of the console's record inside the writing transaction, so
        # that an act and what it tells commit together (docs/notifications.md).
        listen_to_records(on_record)
        # The webhook's payloads are described in the project's OpenAPI document (webhooks).
        document_webhooks(openapi_webhooks)
