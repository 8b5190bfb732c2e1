from django.apps import AppConfig


class DecisionsConfig(AppConfig):
    name = "orbit_console.decisions"
    label = "decisions"
    verbose_name = "Orbit Console: proposals, approvals, durable submissions and their record"

    def ready(self) -> None:
        from orbit_console.audit.chains import register
        from orbit_console.decisions.chain import ConsoleChain
        from orbit_console.decisions.metrics import SubmissionCollector
        from orbit_console.lib.scrape import register_once

        register(ConsoleChain())
        register_once(SubmissionCollector())
