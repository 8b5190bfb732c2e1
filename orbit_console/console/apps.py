from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "orbit_console.console"
    label = "console"
    verbose_name = "Orbit Console: people, decisions and submissions"

    def ready(self) -> None:
        from prometheus_client import REGISTRY

        from orbit_console.audit.chains import register
        from orbit_console.console.chain import ConsoleChain
        from orbit_console.console.metrics import SubmissionCollector

        register(ConsoleChain())
        if not getattr(REGISTRY, "_orbit_submissions", False):
            REGISTRY.register(SubmissionCollector())
            REGISTRY._orbit_submissions = True  # type: ignore[attr-defined]
