"""Gauges read from the database when Prometheus scrapes (``/metrics``, ops/metrics.py).

Each app that owns a table worth watching (submissions, batches, checkpoints, the event
stream's deliveries, the feed's lease) registers one ``ScrapeCollector`` on the default
registry. Their reads are few aggregate queries over indexed columns, made once a scrape.

A scrape must still answer when the database does not: it is how an alert learns that the
database is gone. So the endpoint probes the database first (``orbit_dependency_up``) and says
so here (``database_reachable``): while it is unreachable, or when a read fails, these gauges
are left out of the answer, and the rest of it (per-process counters, the probe itself) is
served as usual. Without the probe a hung database would hold every query for its read timeout
and the scrape would time out whole.
"""

import logging
from collections.abc import Iterable, Iterator
from contextvars import ContextVar

from django.db import DatabaseError
from prometheus_client.core import Metric
from prometheus_client.registry import Collector

logger = logging.getLogger("orbit.metrics")

# Set by the scraping endpoint for the duration of one scrape (asgiref carries it into the
# sync thread that renders the answer). Unset, as in a test that collects directly: reachable.
database_reachable: ContextVar[bool] = ContextVar("database_reachable", default=True)


class ScrapeCollector(Collector):
    """A collector whose families are read from the database at scrape time (``read``)."""

    def describe(self) -> list[Metric]:
        """Nothing up front: registering must not query the database at start-up."""
        return []

    def read(self) -> Iterable[Metric]:
        raise NotImplementedError

    def collect(self) -> Iterator[Metric]:
        if not database_reachable.get():
            return
        try:
            # Read whole before yielding: a failure halfway must not leave half a family.
            families = list(self.read())
        except DatabaseError as error:
            logger.warning(
                "metrics: %s could not read the database: %s",
                type(self).__name__,
                type(error).__name__,
            )
            return
        yield from families


_registered: set[str] = set()


def register_once(collector: Collector) -> None:
    """Register ``collector`` (a ``ScrapeCollector``, or one of an app's instruments) on the
    default registry, once per class (an app's ``ready`` may run again, as in tests that reload
    the apps)."""
    from prometheus_client import REGISTRY

    name = type(collector).__qualname__
    if name not in _registered:
        REGISTRY.register(collector)
        _registered.add(name)
