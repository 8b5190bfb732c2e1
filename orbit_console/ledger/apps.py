from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "orbit_console.ledger"
    label = "ledger"
    verbose_name = "Embedded Orbit task ledger and recovery API"

    def ready(self) -> None:
        from orbit_console.audit.chains import register
        from orbit_console.ledger.api.http import error_page
        from orbit_console.ledger.chain import LedgerChains
        from orbit_console.ops.views import register_error_page

        register_error_page("/v1/", error_page)
        register(LedgerChains())
