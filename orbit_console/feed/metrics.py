"""The feed's own metric (on the default registry, which ``/metrics`` serves: ops/metrics.py)."""

from prometheus_client import Counter

from orbit_console.client.errors import MALFORMED, MISMATCHED, TOO_LARGE

# Why an event was set aside (docs/events.md): the event itself broke the stream's schema;
# the answer to its re-read was too large, malformed, or about something else; or its re-read
# got no answer in SET_ASIDE_AFTER deliveries.
MALFORMED_EVENT = "malformed_event"
UNANSWERED = "unanswered"
SET_ASIDE_REASONS = (MALFORMED_EVENT, TOO_LARGE, MALFORMED, MISMATCHED, UNANSWERED)

EVENTS_SET_ASIDE = Counter(
    "orbit_feed_events_set_aside_total",
    "Events of Orbit's stream the feed acknowledged without applying them, by reason",
    ["reason"],
)
# Exported at 0 from the start, so that an alert on an increase sees the first one.
for _reason in SET_ASIDE_REASONS:
    EVENTS_SET_ASIDE.labels(reason=_reason)
