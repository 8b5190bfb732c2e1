from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "orbit_console.ops"
    label = "ops"
    verbose_name = "Operations: health, request ids, logs, metrics"

    def ready(self) -> None:
        from orbit_console.ops import checks  # noqa: F401 -- registers the deploy checks
