from django.apps import AppConfig


class FeedConfig(AppConfig):
    name = "orbit_console.feed"
    label = "feed"
    verbose_name = "The console's feed of Orbit's events"
