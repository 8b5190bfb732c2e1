from django.apps import AppConfig


class TimelineConfig(AppConfig):
    name = "orbit_console.timeline"
    label = "timeline"
    verbose_name = "Live audit timeline of each task"
