from django.apps import AppConfig


class DecisionsConfig(AppConfig):
    name = "orbit_console.decisions"
    label = "decisions"
    verbose_name = "Orbit Console: proposals, approvals, durable submissions and their record"

    def ready(self) -> None:
        from prometheus_client import REGISTRY

        from orbit_console.audit.chains import register
        from orbit_console.decisions.chain import ConsoleChain
        from orbit_console.decisions.metrics import SubmissionCollector

        register(ConsoleChain())
        if not getattr(REGISTRY, "_orbit_submissions", False):
            REGISTRY.register(SubmissionCollector())
            REGISTRY._orbit_submissions = True  # type: ignore[attr-defined]
