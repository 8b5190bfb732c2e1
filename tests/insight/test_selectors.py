"""What phase 2's pages will read (``insight/selectors.py``, docs/insight.md): precedent's order
and determinism, and its cost at depth (the index it needs, checked in the plan on SQLite and
by the rows read on MariaDB); the tasks waiting now and at each hour, exact from the open
periods and the hourly samples; the clocks, the decisions and what sends tasks to review, per
day and week from the rollups."""

import random
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from orbit_console.insight import selectors, tallies
from orbit_console.insight.models import DecisionFact, Outcome
from orbit_console.insight.waiting import Waiting, wait_end, wait_open
from orbit_console.lib.ids import new_id

HANDLER, CODE = "payment.capture", "SMTP 451"
NOW = datetime(2026, 6, 17, 15, 30, tzinfo=UTC)  # a Wednesday


def settled(
    namespace: str,
    *,
    at: datetime,
    links: bool = False,
    outcome: str = Outcome.SUCCEEDED,
    handler: str = HANDLER,
    code: str = CODE,
    action: str = "review",
    queue_id: str = "q1",
    successor: str = "",
    who: User | None = None,
    fact_id: str | None = None,
    approver: User | None = None,
    reason: str = "",
    evidence: str = "",
) -> DecisionFact:
    """A decision settled at ``at``, with its rollups, as recording.py would leave it."""
    fact = DecisionFact(
        id=fact_id or new_id(),
        namespace_id=namespace,
        queue_id=queue_id,
        task_id=new_id(),
        revision=3,
        action=action,
        handler=handler,
        error_code=code,
        reason=reason or f"why {at:%d %H:%M}",
        evidence_ref=evidence or ("INC-1" if links else "note"),
        evidence_links=links,
        decided_by=who,
        approved_by=approver,
        stored_at=at - timedelta(minutes=5),
        started_at=at - timedelta(minutes=9),
        applied_at=at if outcome in ("succeeded", "failed", "retried") else None,
        settled_at=at if outcome != Outcome.PENDING else None,
        outcome=outcome,
        successor_state=successor,
        successor_ended_at=at + timedelta(hours=1) if successor else None,
        recorded_at=at - timedelta(minutes=5),
    )
    fact.save(force_insert=True)
    tallies.apply(tallies.of_decision(fact))
    return fact


@pytest.fixture
def namespace(live_db: None) -> str:
    return new_id()


def test_precedent_lists_evidence_that_links_first_then_the_newest_the_same_each_time(
    namespace: str,
) -> None:
    who = User.objects.create_user(username=f"op-{new_id()[:8]}")
    day = timedelta(days=1)
    # Inserted in a shuffled order: the order read is the index's, not the insertion's.
    made = [
        ("old-link", NOW - 40 * day, True),
        ("new-plain", NOW - 1 * day, False),
        ("mid-link", NOW - 10 * day, True),
        ("tie-a", NOW - 3 * day, False),
        ("tie-b", NOW - 3 * day, False),
        ("older-plain", NOW - 20 * day, False),
        ("new-link", NOW - 2 * day, True),
    ]
    random.Random(7).shuffle(made)
    ids = {}
    for name, at, links in made:
        fact_id = f"{name:0<32}"[:32].replace("-", "0")
        ids[name] = settled(namespace, at=at, links=links, who=who, fact_id=fact_id).id
    # Not precedent: beyond 180 days, still pending, another error code, handler, namespace.
    settled(namespace, at=NOW - 200 * day, links=True)
    settled(namespace, at=NOW, outcome=Outcome.PENDING, links=True)
    settled(namespace, at=NOW, code="timeout", links=True)
    settled(namespace, at=NOW, handler="invoice.send", links=True)
    settled(new_id(), at=NOW, links=True)

    found = selectors.precedent(namespace, HANDLER, CODE, now=NOW)

    assert [d.id for d in found.decisions] == [
        ids["new-link"],
        ids["mid-link"],
        ids["old-link"],
        ids["new-plain"],
        max(ids["tie-a"], ids["tie-b"]),  # a tie of times: the larger id first
    ]
    first = found.decisions[0]
    assert (first.decided_by, first.reason, first.evidence_ref) == (
        who.username,
        "why 15 15:30",
        "INC-1",
    )
    assert found.counts == {"succeeded": 7}
    assert found.since == datetime(2025, 12, 19, tzinfo=UTC)  # 180 UTC days before today's start
    assert selectors.precedent(namespace, HANDLER, CODE, now=NOW) == found
    # The proposal being approved is not its own precedent; a credential limited to other
    # queues sees none.
    again = selectors.precedent(namespace, HANDLER, CODE, now=NOW, excluding=ids["new-link"])
    assert ids["new-link"] not in [d.id for d in again.decisions] and len(again.decisions) == 5
    assert selectors.precedent(namespace, HANDLER, CODE, now=NOW, queue_ids=["q2"]).decisions == []


def test_precedent_says_how_the_handlers_retries_ended(namespace: str) -> None:
    for successor, code in [
        ("SUCCEEDED", CODE),
        ("SUCCEEDED", "timeout"),
        ("FAILED", CODE),
        ("NEEDS_REVIEW", CODE),
    ]:
        settled(
            namespace,
            at=NOW - timedelta(days=2),
            action="retry",
            outcome=Outcome.RETRIED,
            code=code,
            successor=successor,
        )
    found = selectors.precedent(namespace, HANDLER, CODE, now=NOW)
    assert found.retry_success == (2, 4)  # over every error code of the handler
    assert found.counts == {
        "retried": 3,
        "retry_succeeded": 1,
        "retry_failed": 1,
        "retry_needs_review": 1,
    }


def test_precedent_reads_a_few_rows_of_its_index_however_many_decisions_there_are(
    namespace: str,
) -> None:
    """The list is two index ranges of at most five rows each (``insight_precedent``), never a
    sort of the handler's decisions: checked in the plan on SQLite and by the rows the engine
    reads on MariaDB, over 4 000 decisions of which 2 000 are of the same handler and code."""
    rng = random.Random(43)
    rows = [
        DecisionFact(
            id=new_id(),
            namespace_id=namespace,
            task_id=new_id(),
            revision=3,
            action="review",
            handler=HANDLER if n % 2 else f"handler.{n % 17}",
            error_code=CODE if n % 2 else f"code {n % 5}",
            evidence_links=rng.random() < 0.3,
            settled_at=NOW - timedelta(minutes=rng.randint(0, 170 * 24 * 60)),
            outcome=Outcome.SUCCEEDED,
            recorded_at=NOW,
        )
        for n in range(4_000)
    ]
    DecisionFact.objects.bulk_create(rows, batch_size=2000)
    if connection.vendor == "mysql":
        with connection.cursor() as cursor:
            cursor.execute("ANALYZE TABLE insight_decisionfact")

    def lists() -> Any:
        return selectors.precedent(namespace, HANDLER, CODE, now=NOW)

    assert len(lists().decisions) == 5
    with CaptureQueriesContext(connection) as captured:
        lists()
    listing = [q["sql"] for q in captured.captured_queries if "insight_decisionfact" in q["sql"]]
    assert len(listing) == 1  # five evidence that links: no second range
    if connection.vendor == "sqlite":
        with connection.cursor() as cursor:
            cursor.execute("EXPLAIN QUERY PLAN " + listing[0])
            plan = [row[-1] for row in cursor.fetchall()]
        assert any("USING INDEX insight_precedent" in step for step in plan), plan
        assert not any("TEMP B-TREE" in step for step in plan), plan
        return
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN " + listing[0])
        columns = [c[0] for c in cursor.description]
        plan = dict(zip(columns, cursor.fetchone(), strict=True))
    assert plan["key"] == "insight_precedent", plan
    assert "filesort" not in (plan["Extra"] or ""), plan
    with connection.cursor() as cursor:
        cursor.execute("FLUSH STATUS")
    lists()
    with connection.cursor() as cursor:
        cursor.execute("SHOW SESSION STATUS LIKE 'Handler_read%'")
        read = sum(int(value) for _, value in cursor.fetchall())
    assert read <= 40, read


def waiting(namespace: str, task: str, at: datetime) -> Waiting:
    return Waiting(
        namespace_id=namespace,
        task_id=task,
        revision=3,
        kind="review",
        entered_at=at,
        origin="stream",
        handler=HANDLER,
    )


def test_waiting_now_is_exact_and_says_at_least_past_the_cap(
    namespace: str, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(timezone, "now", lambda: NOW)
    minutes = [5, 10, 20, 40, 80]
    for age in minutes:
        wait_open(waiting(namespace, new_id(), NOW - timedelta(minutes=age)))
    done = wait_open(waiting(namespace, new_id(), NOW - timedelta(days=9)))
    wait_end(task_id=done.task_id, ended_at=NOW, end="reviewed")

    (now,) = selectors.waiting_now([namespace], now=NOW)
    m = 60_000.0
    assert (now.count, now.capped, now.streamed) == (5, False, False)
    assert (now.p50_ms, now.p95_ms, now.oldest_ms) == (20 * m, 80 * m, 80 * m)
    settings.INSIGHT_WAITING_CAP = 3
    (capped,) = selectors.waiting_now([namespace], now=NOW)
    assert (capped.count, capped.capped, capped.p50_ms, capped.oldest_ms) == (3, True, None, 80 * m)
    assert selectors.waiting_counts([namespace]) == {namespace: 5}  # a gauge's: whole


def test_waiting_over_time_at_each_hour_from_the_samples(
    namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each hour's first change keeps what waited when the hour began; an hour without one
    had no change before the next sample (or now), whose tasks it shows, younger."""
    hour = NOW.replace(minute=0)
    clock = [hour]
    monkeypatch.setattr(timezone, "now", lambda: clock[0])
    minute = timedelta(minutes=1)

    clock[0] = hour + 10 * minute
    first = wait_open(waiting(namespace, new_id(), clock[0]))  # samples hour+0: nothing
    clock[0] = hour + 70 * minute
    wait_open(waiting(namespace, new_id(), clock[0]))  # samples hour+1: the first, 50 min
    clock[0] = hour + 190 * minute
    wait_end(task_id=first.task_id, ended_at=clock[0], end="reviewed")  # samples hour+3
    clock[0] = hour + 330 * minute

    points = selectors.waiting_over_time(
        namespace, start=hour - timedelta(hours=1), end=hour + timedelta(hours=6), now=clock[0]
    )
    seen = [(p.at - hour, p.known, p.count, p.oldest_ms and p.oldest_ms / 60_000) for p in points]
    h = timedelta(hours=1)
    assert seen == [
        (-h, False, None, None),  # before the console kept samples
        (0 * h, True, 0, None),
        (1 * h, True, 1, 50.0),
        (2 * h, True, 2, 110.0),  # as at hour+3, an hour younger
        (3 * h, True, 2, 170.0),
        (4 * h, True, 1, 170.0),  # as now: the second alone, since 70 min past the hour
        (5 * h, True, 1, 230.0),
    ]


def test_clocks_decisions_and_causes_per_day_and_week(namespace: str) -> None:
    """Three days of decisions read per day and per week (weeks start on Monday), the clocks'
    totals merged from the days' sketches, the causes ranked with their trend."""
    monday = datetime(2026, 6, 15, tzinfo=UTC)
    for day, count in [(-1, 2), (0, 1), (2, 3)]:
        for n in range(count):
            settled(namespace, at=monday + timedelta(days=day, hours=9 + n))
    start, end = monday - timedelta(days=1), monday + timedelta(days=3)

    per_day = selectors.decisions(namespace, start=start, end=end, step="day")
    assert [p.counts.get(("review", "succeeded"), 0) for p in per_day] == [2, 1, 0, 3]
    per_week = selectors.decisions(namespace, start=start, end=end, step="week")
    assert [p.start for p in per_week] == [monday - timedelta(days=7), monday]
    assert [p.counts[("review", "succeeded")] for p in per_week] == [2, 4]
    deciding = selectors.clock(namespace, "deciding", start=start, end=end, step="day")
    assert [p.count for p in deciding.points] == [2, 1, 0, 3]
    assert deciding.total.count == 6
    assert deciding.total.p95_ms == pytest.approx(4 * 60_000, rel=0.01)  # stored 4 min after

    for handler, entered in [("a.send", 3), ("b.send", 5), ("c.send", 3)]:
        for n in range(entered):
            wait_open(
                replace(waiting(namespace, new_id(), monday + timedelta(hours=n)), handler=handler)
            )
    # The range before (a day: Sunday): one of c.send, the trend's other end.
    wait_open(replace(waiting(namespace, new_id(), monday - timedelta(hours=10)), handler="c.send"))
    top = selectors.causes(namespace, "handler", start=monday, end=monday + timedelta(days=1))
    assert [(c.value, c.count, c.previous) for c in top] == [
        ("b.send", 5, 0),
        ("a.send", 3, 0),  # a tie: by name
        ("c.send", 3, 1),
    ]
    with pytest.raises(ValueError, match="steps"):
        selectors.decisions(namespace, start=start, end=start + timedelta(days=400), step="hour")
