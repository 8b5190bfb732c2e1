"""Objectives that fire while tasks wait (issue 43, item 2): the delivery worker's scan finds a
task past its waiting-time objective and tells it once — in the console, by email and through
the namespace's webhooks — to the supervisors whose credential covers the task's queue; and a
namespace whose decisions have stalled, once per stall. Payloads are what the schema says, in
both languages."""

import json
from datetime import timedelta
from typing import Any

from django.utils import timezone
from jsonschema import Draft202012Validator

from orbit_console.insight.models import StallAlarm, Wait, WaitKind, WaitOrigin
from orbit_console.insight.objectives import objective_set, stall_alarm_set
from orbit_console.insight.waiting import Waiting, wait_decision_started, wait_open
from orbit_console.lib.ids import new_id
from orbit_console.notifications import scans
from orbit_console.notifications.models import Notification, WebhookMessage
from orbit_console.notifications.payloads import plain, slack
from orbit_console.notifications.schema import PLAIN, SLACK
from orbit_console.notifications.texts import rendered
from orbit_console.notifications.webhooks import endpoint_add
from orbit_console.people.models import OrbitCredential
from tests.insight.test_selectors import settled
from tests.notifications.conftest import person

HOUR = timedelta(hours=1)


def parked(namespace: str, *, ago: timedelta, queue_id: str = "q1") -> Wait:
    return wait_open(
        Waiting(
            namespace_id=namespace,
            task_id=new_id(),
            revision=4,
            kind=WaitKind.REVIEW,
            entered_at=timezone.now() - ago,
            origin=WaitOrigin.STREAM,
            queue_id=queue_id,
            handler="payment.capture",
        )
    )


def limited_to(user: Any, *queues: str) -> Any:
    OrbitCredential.objects.filter(user=user).update(queue_ids=" ".join(queues))
    return user


def test_a_task_past_its_objective_is_told_once_to_the_supervisors_of_its_queue(
    namespace: str, settings: Any
) -> None:
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    supervisor = person(namespace, "supervisor", email="sup@example.com")
    same_queue = limited_to(person(namespace, "supervisor"), "q1")
    other_queue = limited_to(person(namespace, "supervisor"), "q2")
    person(namespace, "operator")
    person(new_id(), "supervisor")  # of another namespace
    endpoint, _ = endpoint_add(
        namespace_id=namespace, url="http://127.0.0.1:9/hook", event_types=["objective.breached"]
    )
    objective_set(namespace_id=namespace, decide_within=HOUR)
    late = parked(namespace, ago=2 * HOUR)
    parked(namespace, ago=timedelta(minutes=30))  # not yet due
    in_time = parked(namespace, ago=2 * HOUR)
    wait_decision_started(
        Waiting(namespace, in_time.task_id, 4, WaitKind.REVIEW, in_time.entered_at, "decision"),
        started_at=in_time.entered_at + timedelta(minutes=40),
    )

    scans.scan(timezone.now())
    scans.scan(timezone.now())  # a second pass, or a second worker: nothing twice

    [told] = Notification.objects.filter(namespace_id=namespace, kind="objective.breached")
    assert told.task_id == late.task_id
    assert told.key == f"objective.breached:{late.id}"
    assert set(told.recipients.values_list("user_id", flat=True)) == {supervisor.pk, same_queue.pk}
    assert other_queue.pk not in set(told.recipients.values_list("user_id", flat=True))
    assert told.path == f"/tasks/{late.task_id}"
    assert Wait.objects.get(id=late.id).breached_at is not None
    facts = json.loads(told.facts)
    assert facts == {
        "handler": "payment.capture",
        "waiting_since": late.entered_at.isoformat(),
        "deadline": (late.entered_at + HOUR).isoformat(),
        "objective": "1h",
    }
    [message] = WebhookMessage.objects.filter(endpoint=endpoint)
    body = json.loads(message.body)
    assert body["type"] == "objective.breached" and body["data"]["task_id"] == late.task_id
    title, lines = rendered(told, "en")
    assert title == "A task waits past its objective"
    assert "Objective: decide within 1h" in lines
    title, lines = rendered(told, "zh-hans")
    assert title != "A task waits past its objective" and "1h" in " ".join(lines)
    for language in ("en", "zh-hans"):
        Draft202012Validator(PLAIN).validate(plain(told, language))
        Draft202012Validator(SLACK).validate(slack(told, language))


def test_a_stall_is_told_once_while_it_lasts_and_again_after_a_decision(namespace: str) -> None:
    supervisor = person(namespace, "supervisor")
    limited_to(person(namespace, "supervisor"), "q1")  # a stall is the whole namespace's
    stall_alarm_set(namespace_id=namespace, after=2 * HOUR)
    oldest = parked(namespace, ago=3 * HOUR)
    parked(namespace, ago=HOUR)
    now = timezone.now()

    scans.stalled_decisions(now)
    scans.stalled_decisions(now + timedelta(minutes=5))

    [told] = Notification.objects.filter(namespace_id=namespace, kind="decisions.stalled")
    assert list(told.recipients.values_list("user_id", flat=True)) == [supervisor.pk]
    assert json.loads(told.facts) == {
        "waiting": 2,
        "stalled_since": oldest.entered_at.isoformat(),
        "stall_after": "2h",
    }
    assert told.path == f"/?namespace={namespace}&state=NEEDS_REVIEW"
    for language in ("en", "zh-hans"):
        Draft202012Validator(PLAIN).validate(plain(told, language))
    assert "No decision since: " in " ".join(rendered(told, "en")[1])

    # A decision: the stall is over, and the next one is told.
    decision = settled(namespace, at=now)
    scans.stalled_decisions(now)
    assert StallAlarm.objects.get(namespace_id=namespace).stalled_since is None
    later = decision.recorded_at + 2 * HOUR + timedelta(minutes=1)
    scans.stalled_decisions(later)
    scans.stalled_decisions(later)
    kinds = Notification.objects.filter(namespace_id=namespace, kind="decisions.stalled")
    assert kinds.count() == 2
    second = kinds.order_by("-created_at").first()
    assert second is not None
    assert json.loads(second.facts)["last_decision_at"] == decision.recorded_at.isoformat()


def test_a_namespace_without_a_stall_alarm_is_never_told(namespace: str) -> None:
    person(namespace, "supervisor")
    parked(namespace, ago=100 * HOUR)
    scans.stalled_decisions(timezone.now())
    assert not Notification.objects.filter(namespace_id=namespace).exists()
