"""Insight's series for the monitoring people already run (issue 43, item 5): the gauges read
from the database at scrape time, per Orbit namespace, and the instruments exported at zero for
every namespace known before their first count. (That the rules and the dashboard read what a
real console exports: tests/ops/test_alerts.py; the clocks and breaches counted once
committed: tests/insight/test_objectives.py.)"""

from datetime import timedelta

from django.contrib.auth.models import User
from django.utils import timezone
from prometheus_client import generate_latest
from prometheus_client.registry import CollectorRegistry

from orbit_console.insight.gauges import InsightCollector, Instruments
from orbit_console.insight.models import WaitKind
from orbit_console.insight.objectives import objective_set, stall_alarm_set
from orbit_console.lib.ids import new_id
from orbit_console.lib.secretbox import seal
from orbit_console.people.models import OrbitCredential
from tests.insight.test_objectives import HOUR, parked
from tests.insight.test_selectors import settled


def scraped() -> dict[tuple[str, str], float]:
    registry = CollectorRegistry()
    registry.register(InsightCollector())
    registry.register(Instruments())
    found = {}
    for line in generate_latest(registry).decode().splitlines():
        if line.startswith("#") or "orbit_namespace=" not in line:
            continue
        name, _, value = line.rpartition(" ")
        found[name.split("{")[0], name] = float(value)
    return found


def value(found: dict[tuple[str, str], float], metric: str, namespace: str) -> float | None:
    return next(
        (v for (name, line), v in found.items() if name == metric and f'"{namespace}"' in line),
        None,
    )


def test_the_gauges_say_what_waits_what_is_past_its_objective_and_how_long_nobody_decided(
    live_db: None,
) -> None:
    namespace, quiet = new_id(), new_id()
    user = User.objects.create_user(username=f"op-{new_id()[:8]}")
    OrbitCredential.objects.create(user=user, token_ciphertext=seal("-"), namespace_id=quiet)
    objective_set(namespace_id=namespace, decide_within=HOUR)
    stall_alarm_set(namespace_id=namespace, after=2 * HOUR)
    oldest = parked(namespace, ago=5 * HOUR)
    parked(namespace, ago=2 * HOUR)
    parked(namespace, ago=timedelta(minutes=10))
    parked(namespace, ago=9 * HOUR, kind=WaitKind.RETRY)  # waits, but for no objective
    decision = settled(namespace, at=timezone.now() - 3 * HOUR)

    found = scraped()

    assert value(found, "orbit_tasks_waiting_for_a_person", namespace) == 4
    assert value(found, "orbit_tasks_waiting_past_objective", namespace) == 2
    stalled = value(found, "orbit_decisions_stalled_seconds", namespace)
    since = (timezone.now() - decision.recorded_at).total_seconds()  # the latest decision's
    assert stalled is not None and since - 60 <= stalled <= since
    assert value(found, "orbit_decisions_stall_alarm_seconds", namespace) == 7200
    # A namespace the console knows of (a person's credential) with nothing waiting: zeros,
    # and the instruments' series already there for the first count.
    assert value(found, "orbit_tasks_waiting_for_a_person", quiet) == 0
    assert value(found, "orbit_decisions_stalled_seconds", quiet) == 0
    assert value(found, "orbit_decisions_stall_alarm_seconds", quiet) is None
    assert value(found, "orbit_objective_breaches_total", quiet) == 0
    assert value(found, "orbit_decision_clock_seconds_count", quiet) == 0
    assert oldest.entered_at < decision.recorded_at  # the decision came after: it counts
