"""Insight's gauges, read from the database at scrape time (``lib/scrape.py``), the same in every
process (rules take their max), per Orbit namespace (label ``orbit_namespace``):

- ``orbit_tasks_waiting_for_a_person``: tasks waiting now (in NEEDS_REVIEW, or FAILED or
  CANCELLED with a retry possible; docs/insight.md), a count of one index range;
- ``orbit_tasks_waiting_past_objective``: tasks in NEEDS_REVIEW past their deadline with no
  decision started by it (``WaitingPastObjective``);
- ``orbit_decisions_stalled_seconds``: how long tasks have waited in review with no decision
  made in the namespace (0: none waits), and ``orbit_decisions_stall_alarm_seconds``, the
  namespace's stall alarm where one is set (``DecisionsStalled`` compares the two).

The namespaces are those the console knows of: its people's credentials', the feed's
subscriptions', and those with an objective or a stall alarm. The instruments fed as things
happen (``metrics.py``) are exported by ``Instruments``, after these.
"""

from collections.abc import Iterable, Iterator

from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from orbit_console.feed.models import Source
from orbit_console.insight import metrics
from orbit_console.insight.models import Objective, StallAlarm
from orbit_console.insight.objectives import stall_of, waiting_past_objective
from orbit_console.insight.selectors import waiting_counts
from orbit_console.lib.scrape import ScrapeCollector
from orbit_console.people.models import OrbitCredential

LABELS = ["orbit_namespace"]


def metered_namespaces() -> list[str]:
    """The namespaces the console knows of, sorted (a few small tables)."""
    found: set[str] = set()
    for model in (OrbitCredential, Source, Objective, StallAlarm):
        found.update(model.objects.values_list("namespace_id", flat=True).distinct())
    return sorted(found - {""})


def _per_namespace(name: str, help_text: str, values: Iterable[tuple[str, float]]) -> Metric:
    family = GaugeMetricFamily(name, help_text, labels=LABELS)
    for namespace_id, value in values:
        family.add_metric([namespace_id], value)
    return family


class InsightCollector(ScrapeCollector):
    def read(self) -> Iterator[Metric]:
        now = timezone.now()
        namespaces = metered_namespaces()
        metrics.touch(namespaces)
        yield _per_namespace(
            "orbit_tasks_waiting_for_a_person",
            "Tasks waiting for a person now: in NEEDS_REVIEW, or FAILED or CANCELLED with a retry"
            " possible",
            waiting_counts(namespaces).items(),
        )
        yield _per_namespace(
            "orbit_tasks_waiting_past_objective",
            "Tasks in NEEDS_REVIEW past their waiting-time objective with no decision started",
            waiting_past_objective(namespaces).items(),
        )
        yield _per_namespace(
            "orbit_decisions_stalled_seconds",
            "How long tasks have waited in NEEDS_REVIEW with no decision made in the namespace"
            " (0: none waits)",
            (
                (namespace_id, stall_of(namespace_id).stalled_for(now).total_seconds())
                for namespace_id in namespaces
            ),
        )
        yield _per_namespace(
            "orbit_decisions_stall_alarm_seconds",
            "The namespace's stall alarm: decisions are stalled past this many seconds",
            (
                (namespace_id, after.total_seconds())
                for namespace_id, after in StallAlarm.objects.values_list("namespace_id", "after")
            ),
        )


class Instruments(Collector):
    """The histogram and the counter fed in this process (``metrics.py``)."""

    def collect(self) -> Iterator[Metric]:
        yield from metrics.CLOCK_SECONDS.collect()
        yield from metrics.BREACHES.collect()
