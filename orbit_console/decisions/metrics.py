"""Metrics read from the console's database at scrape time: submissions by state, and the
reconciler's backlog (submissions due for a resend) and lag (how long the oldest has waited)."""

from collections.abc import Iterator

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from orbit_console.decisions.models import OPEN_STATES, Submission, SubmissionState


class SubmissionCollector(Collector):
    def describe(self) -> list[GaugeMetricFamily]:
        """Nothing up front: registering must not query the database at start-up."""
        return []

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_state = GaugeMetricFamily(
            "orbit_submissions", "Console submissions by state", labels=["state"]
        )
        counts = dict(Submission.objects.values_list("state").annotate(n=Count("id")))
        for state in SubmissionState.values:
            by_state.add_metric([state], counts.get(state, 0))
        yield by_state

        now = timezone.now()
        due = Submission.objects.filter(state__in=OPEN_STATES, next_attempt_at__lte=now)
        summary = due.aggregate(n=Count("id"), oldest=Min("next_attempt_at"))
        yield GaugeMetricFamily(
            "orbit_reconciler_backlog",
            "Open submissions whose resend is due",
            value=summary["n"],
        )
        oldest = summary["oldest"]
        yield GaugeMetricFamily(
            "orbit_reconciler_lag_seconds",
            "How long the oldest due submission has waited for its resend",
            value=(now - oldest).total_seconds() if oldest else 0.0,
        )
