from django.apps import AppConfig


class FeedConfig(AppConfig):
    name = "orbit_console.feed"
    label = "feed"
    verbose_name = "The console's feed of Orbit's events"

    def ready(self) -> None:
        from orbit_console.feed.gauges import FeedCollector
        from orbit_console.lib.scrape import register_once

        register_once(FeedCollector())
