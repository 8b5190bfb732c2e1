from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "orbit_console.ops"
    label = "ops"
    verbose_name = "Operations: health, request ids, logs, metrics"

    def ready(self) -> None:
        from django.db.backends.signals import connection_created

        from orbit_console.ops import checks  # noqa: F401 -- registers the deploy checks
        from orbit_console.ops.database import watch_privileges
        from orbit_console.ops.lifeline import watch_supervisor

        connection_created.connect(watch_privileges, dispatch_uid="orbit.watch_privileges")
        # A child of ``manage.py serve`` or of the demo ends with its supervisor: every Django
        # process (commands and ASGI workers) starts here (ops/lifeline.py).
        watch_supervisor()
