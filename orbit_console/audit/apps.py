from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "orbit_console.audit"
    label = "audit"
    verbose_name = "Audit chains: verification and signed checkpoints"

    def ready(self) -> None:
        from orbit_console.audit import checks  # noqa: F401 -- registers the start-up check
        from orbit_console.audit.metrics import AuditCollector
        from orbit_console.lib.scrape import register_once

        register_once(AuditCollector())
