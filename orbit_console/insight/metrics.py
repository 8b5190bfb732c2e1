"""Insight's Prometheus instruments, fed as things happen (docs/deployment.md, "Observability"):

- ``orbit_decision_clock_seconds``: a histogram of the three clocks (waiting, deciding,
  approving; docs/insight.md), observed once the transaction that ends a clock commits, by the
  process that ends it: a console process (a wizard confirmed, a proposal approved or rejected,
  a batch selected and confirmed) or the reconciler (a batch's later tasks, stored by its batch
  worker). Sum it over instances;
- ``orbit_objective_breaches_total``: the tasks told to have waited past their objective, counted
  by the process that tells them (the notifier).

Both are labelled ``orbit_namespace`` (not ``namespace``, which Prometheus' Kubernetes discovery
gives every target). The gauges read from the database are ``gauges.py``'s. Every process
exports each series at zero for the namespaces it knows (``touch``), so that a series exists
before its first count and ``increase`` and ``rate`` see that one too.
"""

from collections.abc import Iterable

from prometheus_client import Counter, Histogram

CLOCKS = ("waiting", "deciding", "approving")
# Human durations: a minute to a week.
BUCKETS = (60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400, 172800, 604800)

CLOCK_SECONDS = Histogram(
    "orbit_decision_clock_seconds",
    "How long tasks waited for a person (entered review to the first decision started), decisions"
    " took (started to confirmed) and approvals took (proposed to approved or rejected), observed"
    " by the process that ended the clock",
    ["orbit_namespace", "clock"],
    buckets=BUCKETS,
    registry=None,
)
BREACHES = Counter(
    "orbit_objective_breaches_total",
    "Tasks told to have waited in NEEDS_REVIEW past their waiting-time objective (once per"
    " waiting period), counted by the process that told them (the notifier)",
    ["orbit_namespace"],
    registry=None,
)


def clock_ended(namespace_id: str, clock: str, seconds: float) -> None:
    if clock in CLOCKS:
        CLOCK_SECONDS.labels(orbit_namespace=namespace_id, clock=clock).observe(max(seconds, 0.0))


def breach_counted(namespace_id: str) -> None:
    BREACHES.labels(orbit_namespace=namespace_id).inc()


def touch(namespace_ids: Iterable[str]) -> None:
    """Export every series of these namespaces, at zero until counted."""
    for namespace_id in namespace_ids:
        BREACHES.labels(orbit_namespace=namespace_id)
        for clock in CLOCKS:
            CLOCK_SECONDS.labels(orbit_namespace=namespace_id, clock=clock)
