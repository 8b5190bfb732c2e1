from django.apps import AppConfig


class LedgerConfig(AppConfig):
    name = "orbit_console.ledger"
    label = "ledger"
    verbose_name = "Embedded Orbit task ledger and recovery API"
