from django.apps import AppConfig


class EventsConfig(AppConfig):
    name = "orbit_console.events"
    label = "events"
    verbose_name = "The recovery API's event stream (orbit.events.v1)"

    def ready(self) -> None:
        from orbit_console.events.api import openapi_paths
        from orbit_console.events.deliveries import fan_out
        from orbit_console.events.metrics import DeliveryCollector
        from orbit_console.ledger.api.openapi import document_paths
        from orbit_console.ledger.journal import listen_to_events
        from orbit_console.lib.scrape import register_once

        listen_to_events(fan_out)
        document_paths(openapi_paths)
        register_once(DeliveryCollector())
