from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "orbit_console.audit"
    label = "audit"
    verbose_name = "Audit chains: verification and signed checkpoints"
