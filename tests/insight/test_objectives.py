"""Waiting-time objectives and the stall alarm (issue 43, item 2; docs/insight.md "Objectives"):
the deadline stored when a task is parked, what an objective's change does to the tasks waiting
now, breaches found while tasks wait and marked once, the work queue's marks, the stall alarm's
view of a namespace, and the share decided within the objective."""

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from orbit_console.insight import metrics
from orbit_console.insight.models import Objective, Wait, WaitKind, WaitOrigin
from orbit_console.insight.objectives import (
    ObjectiveRefused,
    breach_told,
    objective_clear,
    objective_set,
    objective_share,
    queue_marks,
    stall_of,
    untold_breaches,
    waiting_past_objective,
)
from orbit_console.insight.waiting import Waiting, wait_decision_started, wait_end, wait_open
from orbit_console.lib.ids import new_id
from tests.insight.conftest import assert_rollups_match
from tests.insight.test_selectors import settled

HOUR = timedelta(hours=1)


@pytest.fixture
def namespace(live_db: None) -> str:
    return new_id()


def parked(
    namespace: str,
    *,
    ago: timedelta,
    handler: str = "payment.capture",
    kind: str = WaitKind.REVIEW,
    queue_id: str = "q1",
    now: datetime | None = None,
) -> Wait:
    """A task parked ``ago``, as the feed would open its period."""
    return wait_open(
        Waiting(
            namespace_id=namespace,
            task_id=new_id(),
            revision=2,
            kind=kind,
            entered_at=(now or timezone.now()) - ago,
            origin=WaitOrigin.STREAM,
            queue_id=queue_id,
            handler=handler,
        )
    )


def started(wait: Wait, at: datetime) -> Wait:
    """A decision about the waiting task was started at ``at`` (a wizard opened)."""
    seen = Waiting(
        namespace_id=wait.namespace_id,
        task_id=wait.task_id,
        revision=wait.revision,
        kind=wait.kind,
        entered_at=wait.entered_at,
        origin=WaitOrigin.DECISION,
    )
    found = wait_decision_started(seen, started_at=at)
    assert found is not None
    return found


def test_a_task_parked_gets_the_deadline_of_its_handler_else_of_its_namespace(
    namespace: str,
) -> None:
    objective_set(namespace_id=namespace, decide_within=4 * HOUR)
    objective_set(namespace_id=namespace, handler="mail.send", decide_within=HOUR)

    capture = parked(namespace, ago=timedelta(minutes=5))
    mail = parked(namespace, ago=timedelta(minutes=5), handler="mail.send")
    retry = parked(namespace, ago=timedelta(minutes=5), kind=WaitKind.RETRY)
    elsewhere = parked(new_id(), ago=timedelta(minutes=5))

    assert capture.deadline == capture.entered_at + 4 * HOUR
    assert mail.deadline == mail.entered_at + HOUR
    assert retry.deadline is None  # a task waiting for a retry has no objective
    assert elsewhere.deadline is None
    assert Wait.objects.get(id=mail.id).deadline == mail.entered_at + HOUR  # stored


def test_changing_an_objective_gives_the_tasks_waiting_now_its_deadline_not_those_that_ended(
    namespace: str,
) -> None:
    """Documented: the deadline is recomputed for tasks waiting now; a period that ended keeps
    the deadline of its time (a decision is judged by the objective then)."""
    objective_set(namespace_id=namespace, decide_within=8 * HOUR)
    old = parked(namespace, ago=3 * HOUR)
    young = parked(namespace, ago=timedelta(minutes=10))
    mail = parked(namespace, ago=3 * HOUR, handler="mail.send")
    objective_set(namespace_id=namespace, handler="mail.send", decide_within=HOUR)
    ended = parked(namespace, ago=5 * HOUR)
    wait_end(task_id=ended.task_id, ended_at=timezone.now(), end="reviewed")
    # A decision started in time under the old objective, its receipt not yet in: counted in
    # time now, late under the new one.
    decided = started(parked(namespace, ago=3 * HOUR), timezone.now() - 2 * HOUR)

    _, moved = objective_set(namespace_id=namespace, decide_within=2 * HOUR)

    assert (moved.waiting, moved.past) == (3, 1)  # old, young, decided; old is past, unstarted
    assert Wait.objects.get(id=old.id).deadline == old.entered_at + 2 * HOUR
    assert Wait.objects.get(id=young.id).deadline == young.entered_at + 2 * HOUR
    assert Wait.objects.get(id=mail.id).deadline == mail.entered_at + HOUR  # its own objective
    assert Wait.objects.get(id=ended.id).deadline == ended.entered_at + 8 * HOUR  # kept
    assert Wait.objects.get(id=decided.id).deadline == decided.entered_at + 2 * HOUR
    assert_rollups_match(namespace)  # decided_in_time became decided_late, counted once

    # The handler's objective removed: its tasks get the namespace's; the namespace's removed:
    # none.
    cleared = objective_clear(namespace_id=namespace, handler="mail.send")
    assert cleared is not None and cleared.waiting == 1
    assert Wait.objects.get(id=mail.id).deadline == mail.entered_at + 2 * HOUR
    assert objective_clear(namespace_id=namespace, handler="mail.send") is None
    objective_clear(namespace_id=namespace)
    assert set(
        Wait.objects.filter(namespace_id=namespace, ended_at__isnull=True).values_list(
            "deadline", flat=True
        )
    ) == {None}
    assert_rollups_match(namespace)


@pytest.mark.parametrize(
    ("within", "handler", "said"),
    [
        (timedelta(0), "", "between 1m and 365d"),
        (timedelta(seconds=30), "", "between 1m and 365d"),
        (-HOUR, "", "between 1m and 365d"),
        (timedelta(days=366), "", "between 1m and 365d"),
        (HOUR, "h" * 201, "at most 200 characters"),
    ],
)
def test_an_objective_out_of_bounds_is_refused_and_changes_nothing(
    namespace: str, within: timedelta, handler: str, said: str
) -> None:
    waiting = parked(namespace, ago=HOUR)
    with pytest.raises(ObjectiveRefused, match=said):
        objective_set(namespace_id=namespace, handler=handler, decide_within=within)
    assert not Objective.objects.filter(namespace_id=namespace).exists()
    assert Wait.objects.get(id=waiting.id).deadline is None


def test_a_breach_is_found_while_the_task_waits_and_marked_once(namespace: str) -> None:
    now = timezone.now()
    objective_set(namespace_id=namespace, decide_within=HOUR)
    past = parked(namespace, ago=2 * HOUR)
    late = started(parked(namespace, ago=3 * HOUR), now - HOUR)  # started after its deadline
    in_time = started(parked(namespace, ago=2 * HOUR), now - 90 * timedelta(minutes=1))
    parked(namespace, ago=timedelta(minutes=20))  # not yet due
    gone = parked(namespace, ago=2 * HOUR)
    wait_end(task_id=gone.task_id, ended_at=now, end="moved")  # stopped waiting: not told

    found = [wait.id for wait in untold_breaches(now=now) if wait.namespace_id == namespace]
    assert found == [late.id, past.id]  # the longest past first
    assert waiting_past_objective([namespace]) == {namespace: 2}
    assert in_time.id not in found

    before = _breaches(namespace)
    with transaction.atomic():
        assert breach_told(wait=past, now=now)
        assert not breach_told(wait=past, now=now)  # once per period
        assert _breaches(namespace) == before  # counted once committed
    assert _breaches(namespace) == before + 1
    assert [w.id for w in untold_breaches(now=now) if w.namespace_id == namespace] == [late.id]
    assert waiting_past_objective([namespace]) == {namespace: 2}  # told or not, still past

    with pytest.raises(RuntimeError), transaction.atomic():
        assert breach_told(wait=late, now=now)
        raise RuntimeError("the notification could not be written")
    assert _breaches(namespace) == before + 1  # rolled back: not counted, not marked
    assert Wait.objects.get(id=late.id).breached_at is None


def _breaches(namespace: str) -> float:
    return metrics.BREACHES.labels(orbit_namespace=namespace)._value.get()


def test_the_work_queue_marks_tasks_past_their_deadline_and_near_it(namespace: str) -> None:
    now = timezone.now()
    objective_set(namespace_id=namespace, decide_within=5 * HOUR)
    past = parked(namespace, ago=6 * HOUR, now=now)
    near = parked(namespace, ago=timedelta(hours=4, minutes=30), now=now)  # 30 min of 5 h left
    early = parked(namespace, ago=HOUR, now=now)
    on_it = started(parked(namespace, ago=timedelta(hours=4, minutes=30), now=now), now)
    late = started(parked(namespace, ago=6 * HOUR, now=now), now)
    retry = parked(namespace, ago=6 * HOUR, kind=WaitKind.RETRY, now=now)

    marks = queue_marks(
        [w.task_id for w in (past, near, early, on_it, late, retry)] + ["unknown"], now=now
    )

    assert set(marks) == {past.task_id, near.task_id, late.task_id}
    assert marks[past.task_id].past and marks[late.task_id].past
    assert not marks[near.task_id].past
    assert marks[near.task_id].deadline == near.entered_at + 5 * HOUR
    assert marks[past.task_id].objective == "5h"


def test_the_stall_alarm_counts_from_the_latest_decision_or_the_oldest_task_waiting(
    namespace: str,
) -> None:
    now = timezone.now()
    assert stall_of(namespace).since is None  # nothing waits
    parked(namespace, ago=6 * HOUR, kind=WaitKind.RETRY)  # a retry waits for nobody in particular
    assert stall_of(namespace).since is None
    oldest = parked(namespace, ago=5 * HOUR)
    parked(namespace, ago=HOUR)
    assert stall_of(namespace).since == oldest.entered_at  # no decision ever
    assert stall_of(namespace).stalled_for(oldest.entered_at + 5 * HOUR) == 5 * HOUR
    assert stall_of(namespace).stalled_for(oldest.entered_at - HOUR) == timedelta(0)

    settled(namespace, at=now - 6 * HOUR)  # a decision before the oldest task waited
    assert stall_of(namespace).since == oldest.entered_at
    fact = settled(namespace, at=now - 2 * HOUR)
    assert stall_of(namespace).since == fact.recorded_at
    assert stall_of(namespace).last_decision_at == fact.recorded_at


def test_the_share_decided_within_the_objective_per_day(namespace: str) -> None:
    day = datetime(2026, 3, 2, tzinfo=UTC)
    objective_set(namespace_id=namespace, decide_within=HOUR)
    for entered, after, handler in (
        (day + 2 * HOUR, timedelta(minutes=30), "a"),  # in time
        (day + 3 * HOUR, timedelta(minutes=60), "a"),  # at the deadline: in time
        (day + 4 * HOUR, timedelta(minutes=61), "b"),  # late
        (day + 26 * HOUR, timedelta(minutes=90), "a"),  # late, the next day
    ):
        wait = parked(namespace, ago=timezone.now() - entered, handler=handler)
        started(wait, entered + after)
    parked(namespace, ago=timezone.now() - day - 5 * HOUR)  # never decided: not counted

    share = objective_share(namespace, start=day, end=day + timedelta(days=3), step="day")
    assert [(p.in_time, p.late) for p in share.points] == [(2, 1), (0, 1), (0, 0)]
    assert (share.total.in_time, share.total.late) == (2, 2)
    assert share.total.share == 0.5
    assert share.points[2].share is None
    by_handler = objective_share(namespace, start=day, end=day + timedelta(days=3), handler="b")
    assert (by_handler.total.in_time, by_handler.total.late) == (0, 1)
    other_queue = objective_share(
        namespace, start=day, end=day + timedelta(days=3), queue_ids=["q2"]
    )
    assert other_queue.total.in_time + other_queue.total.late == 0


def test_a_clock_is_observed_once_committed_and_once_only(namespace: str) -> None:
    """The histogram counts the waiting clock of a period when its first decision starts, in
    the committing process; a rolled-back start counts nothing, and a start learnt later to
    have been earlier is not counted again."""
    wait = parked(namespace, ago=2 * HOUR)
    count = _clock_count(namespace, "waiting")
    with pytest.raises(RuntimeError), transaction.atomic():
        started(wait, timezone.now() - HOUR)
        raise RuntimeError("rolled back")
    assert _clock_count(namespace, "waiting") == count
    started(wait, timezone.now() - HOUR)
    assert _clock_count(namespace, "waiting") == count + 1
    started(wait, timezone.now() - 90 * timedelta(minutes=1))  # an earlier start, learnt later
    assert _clock_count(namespace, "waiting") == count + 1
    assert_rollups_match(namespace)


def _clock_count(namespace: str, clock: str) -> float:
    histogram: Any = metrics.CLOCK_SECONDS.labels(orbit_namespace=namespace, clock=clock)
    return sum(bucket.get() for bucket in histogram._buckets)
