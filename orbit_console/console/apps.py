from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "orbit_console.console"
    label = "console"
    verbose_name = "Orbit Console: the pages people work in"
