"""Insight where people decide (issue 43, items 2 and 3), over real HTTP against a real console:

- precedent on the review and retry wizards' decide step and on the proposal page a
  supervisor approves from: counts by outcome, the five most useful (evidence that links
  first, then the newest) with who, when, reason (capped) and evidence (a link where the
  namespace's policy makes one), for a retry how the handler's retries ended; the same list
  each time; nothing filled in; a credential limited to some queues shown those queues' only;
- the work queue's marks of tasks past their waiting-time objective and near it.
"""

import json
import re
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from orbit_console.decisions.evidence import evidence_policy_set
from orbit_console.decisions.proposals import proposal_create, proposal_reject
from orbit_console.decisions.submissions import DecidedOn
from orbit_console.insight.models import DecisionFact, Outcome, WaitKind, WaitOrigin
from orbit_console.insight.objectives import objective_set
from orbit_console.insight.waiting import Waiting, wait_open
from orbit_console.ledger.models import Task as LedgerTask
from orbit_console.lib.ids import new_id
from orbit_console.people.accounts import account_company
from tests.console.web import (
    RETRY_CHECKS,
    REVIEW_CHECKS,
    Console,
    element,
    form_with,
    signed_in,
    step_of,
    text_of,
    wizard_post,
)
from tests.insight.test_selectors import settled
from tests.support.orbit import review_body
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer

HANDLER = "object.prepare"
DAY = timedelta(days=1)


def earlier(
    world: dict[str, Any],
    code: str,
    *,
    ago: timedelta,
    links: bool = False,
    outcome: str = Outcome.SUCCEEDED,
    action: str = "review",
    queue_id: str | None = None,
    who: User | None = None,
    approver: User | None = None,
    reason: str = "",
    successor: str = "",
) -> DecisionFact:
    """A decision settled ``ago`` about another task of the world's handler, with its rollups,
    as the console would have recorded it."""
    return settled(
        world["namespace_id"],
        at=timezone.now() - ago,
        links=links,
        outcome=outcome,
        handler=HANDLER,
        code=code,
        action=action,
        queue_id=queue_id or world["queue_id"],
        successor=successor,
        who=who,
        approver=approver,
        reason=reason or f"checked the store, {ago.days} days ago",
        evidence=f"INC-{ago.days}" if links else f"note-{ago.days}",
    )


def panel(html: str) -> str:
    return element(html, r'<section class="panel precedent".*?</section>')


def listed(html: str) -> list[str]:
    return re.findall(r'<li data-decision="([0-9a-f]{32})">', panel(html))


def decide_step(console: Console, task_id: str, action: str) -> str:
    path = f"/tasks/{task_id}/{action}"
    checks = REVIEW_CHECKS if action == "review" else RETRY_CHECKS
    page = wizard_post(console, path, console.get(path).text, checks)
    assert page.status_code == 200 and step_of(page.text) == "decide", text_of(page.text)
    return page.text


@pytest.fixture
def precedents(world: dict[str, Any], people: dict[str, TestPerson]) -> dict[str, Any]:
    """Earlier decisions about tasks of the world's handler whose last error was "connection
    reset" (the world's task in NEEDS_REVIEW), in its namespace, its policy making links of
    INC-<n>."""
    evidence_policy_set(
        namespace_id=world["namespace_id"],
        pattern=r"INC-(\d+)",
        example="INC-1",
        link_template="https://tracker.example.com/browse/INC-{1}",
    )
    ann = User.objects.create_user(username=f"ann-{new_id()[:8]}")
    company = User.objects.create_user(username=f"sup-{new_id()[:8]}")
    account_company(user=company)
    code = "connection reset"
    made = {
        "newest_plain": earlier(world, code, ago=1 * DAY, who=ann),
        "linked_old": earlier(world, code, ago=20 * DAY, links=True, who=ann),
        "linked_new": earlier(
            world, code, ago=3 * DAY, links=True, who=ann, approver=company, reason="x" * 600
        ),
        "failed": earlier(world, code, ago=2 * DAY, outcome=Outcome.FAILED, who=ann),
        "rejected": earlier(world, code, ago=4 * DAY, outcome=Outcome.REJECTED, who=ann),
        "oldest_plain": earlier(world, code, ago=30 * DAY, who=ann),
        # Another queue's, the newest and linked: shown only to credentials that read it.
        "other_queue": earlier(world, code, ago=DAY / 2, links=True, queue_id="q-" + new_id()),
        # Too old (180 days), another code, another namespace's: never.
        "too_old": earlier(world, code, ago=200 * DAY, links=True),
        "other_code": earlier(world, "timeout", ago=DAY, links=True),
    }
    return {"code": code, "ann": ann, "company": company, **made}


def test_the_decide_step_shows_what_was_decided_before_and_fills_in_nothing(
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    precedents: dict[str, Any],
) -> None:
    with signed_in(orbit_server.url, people["operator"]) as operator:
        html = decide_step(operator, world["tasks"]["needs_review"], "review")
        again = decide_step(operator, world["tasks"]["needs_review"], "review")

    shown = panel(html)
    assert listed(html) == [
        precedents[key].id
        for key in ("other_queue", "linked_new", "linked_old", "newest_plain", "failed")
    ]
    assert listed(again) == listed(html)  # deterministic: the same task shows the same list
    text = text_of(shown)
    assert "5 declared SUCCEEDED" in text and "1 declared FAILED" in text
    assert "1 proposal rejected" in text
    assert "connection reset" in text and HANDLER in text
    # Who, when, the reason capped, the evidence as a link where the policy makes one.
    linked_new = element(shown, rf'<li data-decision="{precedents["linked_new"].id}">.*?</li>')
    assert 'href="https://tracker.example.com/browse/INC-3"' in linked_new
    assert f"decided by {precedents['ann'].username}" in text_of(linked_new)
    assert f"approved by {precedents['company'].username} company" in text_of(linked_new)
    assert "x" * 279 + "…" in linked_new and "x" * 281 not in linked_new
    assert "<time datetime=" in linked_new
    plain = element(shown, rf'<li data-decision="{precedents["newest_plain"].id}">.*?</li>')
    assert "note-1" in plain and "evidence-link" not in plain
    # It informs; it never decides: the decision's fields are as empty as without it.
    form = form_with(html, "reason")
    assert form.value("reason") == "" and form.value("evidence_ref") == ""
    assert form.value("result") == "" and form.value("outcome") in (None, "")
    assert "<form" not in shown and "<button" not in shown


def test_a_credential_limited_to_some_queues_sees_only_their_decisions(
    orbit_server: DaphneServer, world: dict[str, Any], precedents: dict[str, Any]
) -> None:
    limited = make_person(world, "operator", queue_ids=frozenset({world["queue_id"]}))
    with signed_in(orbit_server.url, limited) as operator:
        html = decide_step(operator, world["tasks"]["needs_review"], "review")
    assert precedents["other_queue"].id not in panel(html)
    assert listed(html)[0] == precedents["linked_new"].id
    assert "4 declared SUCCEEDED" in text_of(panel(html))  # the other queue's not counted


def test_a_retry_shows_how_the_handlers_retries_ended(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    code = "object not found"  # the world's FAILED task's
    for successor in ("SUCCEEDED", "SUCCEEDED", "FAILED"):
        earlier(world, code, ago=DAY, action="retry", outcome=Outcome.RETRIED, successor=successor)
    earlier(world, "other", ago=DAY, action="retry", outcome=Outcome.RETRIED, successor="SUCCEEDED")
    with signed_in(orbit_server.url, people["operator"]) as operator:
        html = decide_step(operator, world["tasks"]["failed"], "retry")
    text = text_of(panel(html))
    assert f"Retries of {HANDLER} in that time: 3 of 4 new tasks succeeded." in text
    assert "3 retried" in text  # this code's
    assert text.count("the new task:") == 3


def test_the_proposal_page_shows_precedent_while_it_waits_leaving_itself_out(
    orbit_server: DaphneServer,
    world: dict[str, Any],
    people: dict[str, TestPerson],
    precedents: dict[str, Any],
) -> None:
    proposal = proposal_create(
        action="review",
        task_id=world["tasks"]["needs_review"],
        queue_id=world["queue_id"],
        namespace_id=world["namespace_id"],
        expected_revision="3",
        body=json.dumps(review_body(evidence_ref="INC-77")),
        proposed_by=people["operator"].user,
        decided_on=DecidedOn(handler=HANDLER, last_error_code=precedents["code"]),
    ).proposal
    with Console(orbit_server.url, headers={"Accept-Language": "zh-hans"}) as chinese:
        chinese.sign_in(people["supervisor"])
        html = chinese.get(f"/proposals/{proposal.id}").text
        assert listed(html)[:2] == [precedents["other_queue"].id, precedents["linked_new"].id]
        assert proposal.id not in listed(html)
        assert "Decided before" not in panel(html)  # in the reader's language
        proposal_reject(proposal_id=proposal.id, supervisor=people["supervisor"].user, reason="no")
        assert "precedent" not in chinese.get(f"/proposals/{proposal.id}").text  # decided


def test_no_precedent_says_so(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    with signed_in(orbit_server.url, people["operator"]) as operator:
        html = decide_step(operator, world["tasks"]["needs_review_2"], "review")
    assert "No decision about such a task in that time." in text_of(panel(html))
    assert listed(html) == []


def parked(world: dict[str, Any], task_key: str, *, ago: timedelta) -> None:
    """The world's task waits since ``ago``, as the feed would have told it."""
    task = LedgerTask.objects.get(id=world["tasks"][task_key])
    wait_open(
        Waiting(
            namespace_id=world["namespace_id"],
            task_id=task.id,
            revision=task.revision,
            kind=WaitKind.REVIEW,
            entered_at=timezone.now() - ago,
            origin=WaitOrigin.STREAM,
            queue_id=world["queue_id"],
            handler=task.handler,
        )
    )


def test_the_work_queue_marks_tasks_past_their_objective_and_near_it(
    orbit_server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    objective_set(namespace_id=world["namespace_id"], decide_within=timedelta(hours=4))
    parked(world, "needs_review", ago=timedelta(hours=5))
    parked(world, "needs_review_2", ago=timedelta(hours=3, minutes=30))
    parked(world, "needs_review_leased", ago=timedelta(minutes=5))

    def row(html: str, key: str) -> str:
        return element(html, rf"<tr>(?:(?!</tr>).)*{world['tasks'][key]}.*?</tr>")

    with signed_in(orbit_server.url, people["operator"]) as operator:
        html = operator.get("/").text
    past = element(row(html, "needs_review"), r'<span class="flag danger objective-mark".*?</span>')
    assert 'data-objective="past"' in past and "past its 4h objective" in text_of(past)
    near = row(html, "needs_review_2")
    assert 'data-objective="near"' in near and "objective due" in text_of(near)
    assert "objective-mark" not in row(html, "needs_review_leased")
    with Console(orbit_server.url, headers={"Accept-Language": "zh-hans"}) as chinese:
        chinese.sign_in(people["operator"])
        html = chinese.get("/").text
    assert "past its 4h objective" not in row(html, "needs_review")
    assert 'data-objective="past"' in row(html, "needs_review")
