"""The audit's gauges, read from the database at scrape time (``lib/scrape.py``): when the
newest checkpoint was taken, and what the last ``audit verify`` found.

The checkpoints themselves live in the checkpoint job's folder, which no console process
mounts; the database's list of written checkpoints (``WrittenCheckpoint``) and of verification
runs (``ChainVerification``) is what every process can read. A checkpoint is written whenever a
chain's head moved, and at least hourly (``checkpoints.IDLE_CHECKPOINT``): an old newest one
means the job stopped, or cannot write."""

from collections.abc import Iterator

from django.db.models import Max
from prometheus_client.core import GaugeMetricFamily

from orbit_console.audit.models import ChainVerification, WrittenCheckpoint
from orbit_console.lib.scrape import ScrapeCollector


class AuditCollector(ScrapeCollector):
    def read(self) -> Iterator[GaugeMetricFamily]:
        newest = WrittenCheckpoint.objects.aggregate(taken=Max("taken_at"))["taken"]
        yield GaugeMetricFamily(
            "orbit_audit_checkpoint_last_timestamp_seconds",
            "When the newest signed checkpoint of the audit chains was taken (Unix time; 0: none)",
            value=newest.timestamp() if newest else 0.0,
        )
        last = ChainVerification.objects.order_by("-ran_at", "-id").only("ran_at", "ok").first()
        yield GaugeMetricFamily(
            "orbit_audit_verify_last_timestamp_seconds",
            "When 'manage.py audit verify' last ran (Unix time; 0: never)",
            value=last.ran_at.timestamp() if last else 0.0,
        )
        yield GaugeMetricFamily(
            "orbit_audit_verify_failing",
            "Whether the last 'manage.py audit verify' found a problem (1) or not (0; none ran: 0)",
            value=0 if last is None or last.ok else 1,
        )
