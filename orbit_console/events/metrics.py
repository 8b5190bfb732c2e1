"""The event stream's gauges, read from the database at scrape time (``lib/scrape.py``): how
many deliveries subscribers owe an acknowledgement for (the backlog), and how long the oldest
has been owed (the lag). A delivery row lives from the event's commit to its acknowledgement
(``events/deliveries.py``), so both stay near zero while every subscriber keeps up."""

from collections.abc import Iterator

from django.db.models import Count, Min
from django.utils import timezone
from prometheus_client.core import GaugeMetricFamily

from orbit_console.events.models import Delivery
from orbit_console.lib.scrape import ScrapeCollector


class DeliveryCollector(ScrapeCollector):
    def read(self) -> Iterator[GaugeMetricFamily]:
        owed = Delivery.objects.aggregate(n=Count("id"), oldest=Min("created_at"))
        yield GaugeMetricFamily(
            "orbit_events_owed",
            "Events of the stream written and not yet acknowledged, over every subscription",
            value=owed["n"],
        )
        oldest = owed["oldest"]
        yield GaugeMetricFamily(
            "orbit_events_oldest_owed_seconds",
            "How long the oldest unacknowledged event of the stream has been owed (0: none)",
            value=(timezone.now() - oldest).total_seconds() if oldest else 0.0,
        )
