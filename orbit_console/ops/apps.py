from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "orbit_console.ops"
    label = "ops"
    verbose_name = "Operations: health, request ids, logs"
