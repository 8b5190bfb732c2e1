"""The audit's gauges, read from the database at scrape time (``lib/scrape.py``): when the
newest checkpoint was taken, and what the last ``audit verify`` found.

The checkpoints themselves live in the checkpoint job's folder, which no console process
mounts; the database's list of written checkpoints (``WrittenCheckpoint``) and of verification
runs (``ChainVerification``) is what every process can read. A checkpoint is written whenever a
chain's head moved, and at least hourly (``checkpoints.IDLE_CHECKPOINT``): an old newest one
means the job stopped, or cannot write.

Whoever holds the runtime database rights can insert rows into both tables, so the gauges read
only what the explorer shows (``audit/status.py``): rows whose signature holds. A newer row
whose signature does not — a result written by hand — counts as failing, as does a process
that cannot check signatures at all (no ``ORBIT_AUDIT_VERIFY_KEYS``): a result nobody can check
must not keep the alert quiet."""

from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily

from orbit_console.audit.status import chain_status
from orbit_console.lib.scrape import ScrapeCollector


class AuditCollector(ScrapeCollector):
    def read(self) -> Iterator[GaugeMetricFamily]:
        status = chain_status()
        checkpoint, verification = status.checkpoint, status.verification
        yield GaugeMetricFamily(
            "orbit_audit_checkpoint_last_timestamp_seconds",
            "When the newest signed checkpoint of the audit chains was taken, as its signed row "
            "says (Unix time; 0: none)",
            value=checkpoint.taken_at.timestamp() if checkpoint else 0.0,
        )
        yield GaugeMetricFamily(
            "orbit_audit_verify_last_timestamp_seconds",
            "When 'manage.py audit verify' last ran, as its signed result says (Unix time; 0: "
            "never)",
            value=verification.ran_at.timestamp() if verification else 0.0,
        )
        failing = (
            not status.can_check
            or status.unsigned_verification is not None
            or (verification is not None and not verification.ok)
        )
        yield GaugeMetricFamily(
            "orbit_audit_verify_failing",
            "Whether the last 'manage.py audit verify' found a problem, a newer result's "
            "signature does not hold, or this process cannot check signatures (1); else 0",
            value=1 if failing else 0,
        )
