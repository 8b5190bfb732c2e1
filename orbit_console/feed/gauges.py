"""The feed's gauges, read from the database at scrape time (``lib/scrape.py``): the
subscriptions the console consumes by what is known of their stream, and the consumer's lease.

The lease is the feed's heartbeat: the consuming process renews it every third of
``CONSOLE_FEED_LEASE_SECONDS`` (``feed/consumer.py``), so its expiry lies in the past only
while no process consumes. Any console process can read it, whichever process consumes."""

from collections.abc import Iterator

from django.db.models import Count
from prometheus_client.core import GaugeMetricFamily

from orbit_console.feed.consumer import LEADERSHIP
from orbit_console.feed.models import Leadership, Source, SourceStatus
from orbit_console.lib.scrape import ScrapeCollector


class FeedCollector(ScrapeCollector):
    def read(self) -> Iterator[GaugeMetricFamily]:
        sources = GaugeMetricFamily(
            "orbit_feed_sources",
            "Subscriptions of Orbit's event stream the console consumes, by stream status",
            labels=["status"],
        )
        counts = dict(Source.objects.values_list("status").annotate(n=Count("id")))
        for status in SourceStatus.values:
            sources.add_metric([status], counts.get(status, 0))
        yield sources
        lease = Leadership.objects.filter(name=LEADERSHIP).only("expires_at").first()
        yield GaugeMetricFamily(
            "orbit_feed_lease_expires_timestamp_seconds",
            "When the feed consumer's lease runs out unless renewed (Unix time; 0: never taken)",
            value=lease.expires_at.timestamp() if lease else 0.0,
        )
