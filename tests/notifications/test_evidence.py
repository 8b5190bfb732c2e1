"""Evidence that links (issue 32): a namespace's policy — a pattern with an example, a link
template — checked by the wizard before confirming and shown as a link on the pages and in
notifications. Without a policy nothing changes. Whatever the pattern, checking a reference and
making its link take time linear in a reference no longer than the API takes (issue 41)."""

import io
import json
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.template import Context, Template
from django.utils import timezone

from orbit_console.console.explorer import (
    Filters,
    as_row,
    events,
    with_approvers,
    with_evidence_links,
)
from orbit_console.console.forms import ReviewDecideForm
from orbit_console.decisions.evidence import (
    PolicyRefused,
    evidence_link,
    evidence_policy_set,
    matches,
    policy_for,
)
from orbit_console.decisions.models import EvidencePolicy
from orbit_console.decisions.proposals import proposal_create
from orbit_console.ledger.lifecycle import namespace_create
from orbit_console.lib.ids import new_id
from orbit_console.lib.recovery_rules import MAX_EVIDENCE_REF_CHARS
from orbit_console.notifications.models import Notification
from orbit_console.notifications.payloads import plain
from tests.notifications.conftest import person

TRACKER = "https://tracker.example.com/browse/INC-{1}"
SHOWN = Template("{% load evidence %}{% evidence_ref ref ns %}")  # the proposal's, the batch's


@pytest.fixture
def namespace(live_db: None) -> str:
    """A namespace of the embedded ledger: ``manage.py evidence`` takes no other (issue 41)."""
    return namespace_create(name=f"evidence {new_id()}")[0].id


def decide(evidence: str, namespace: str) -> ReviewDecideForm:
    data = {"outcome": "SUCCEEDED", "result": "{}", "reason": "checked", "evidence_ref": evidence}
    return ReviewDecideForm(data, evidence_policy=policy_for(namespace))


def test_the_wizard_checks_the_pattern_and_shows_the_example(namespace: str) -> None:
    assert decide("whatever-ref", namespace).is_valid()  # no policy: as before
    evidence_policy_set(
        namespace_id=namespace, pattern=r"INC-(\d+)", example="INC-1234", link_template=TRACKER
    )

    wrong = decide("whatever-ref", namespace)
    assert not wrong.is_valid()
    assert "INC-1234" in str(wrong.errors["evidence_ref"])
    assert "INC-1234" in str(wrong.fields["evidence_ref"].help_text)
    assert decide("INC-77", namespace).is_valid()


def test_a_policy_must_hold_for_its_own_example(namespace: str) -> None:
    with pytest.raises(PolicyRefused):
        evidence_policy_set(namespace_id=namespace, pattern=r"INC-(\d+)", example="JIRA-1")
    with pytest.raises(PolicyRefused):
        evidence_policy_set(namespace_id=namespace, pattern="(", example="x")
    with pytest.raises(PolicyRefused):
        evidence_policy_set(
            namespace_id=namespace,
            pattern=r"INC-\d+",
            example="INC-1",
            link_template="javascript:{0}",
        )
    with pytest.raises(CommandError):
        call_command("evidence", "set", namespace, "--pattern", "INC-1", "--example", "X")


def test_pages_and_notifications_show_the_reference_as_a_link(namespace: str) -> None:
    call_command(
        "evidence",
        "set",
        namespace,
        "--pattern",
        r"INC-(\d+)",
        "--example",
        "INC-1",
        "--link",
        TRACKER,
    )
    assert evidence_link(namespace, "INC-42") == "https://tracker.example.com/browse/INC-42"
    assert evidence_link(namespace, "nope") == ""
    assert evidence_link(f"{namespace}-other", "INC-42") == ""
    person(namespace, "supervisor")
    body = json.dumps({"outcome": "SUCCEEDED", "reason": "checked", "evidence_ref": "INC-42"})
    proposal = proposal_create(
        action="review",
        task_id=f"task-{namespace}",
        expected_revision="3",
        body=body,
        proposed_by=person(namespace, "operator"),
        namespace_id=namespace,
    ).proposal

    told: Any = Notification.objects.get(kind="proposal.waiting", proposal_id=proposal.id)
    payload = plain(told, "en")
    assert payload["data"]["facts"]["evidence_link"] == "https://tracker.example.com/browse/INC-42"
    assert "Evidence link: https://tracker.example.com/browse/INC-42" in payload["data"]["lines"]

    # What the proposal's and the batch's pages render (templates/console/proposal.html).
    shown = SHOWN
    linked = shown.render(Context({"ref": "INC-42", "ns": namespace}))
    assert 'href="https://tracker.example.com/browse/INC-42"' in linked
    plain_text = shown.render(Context({"ref": "<b>INC-x</b>", "ns": namespace}))
    assert "href" not in plain_text and "&lt;b&gt;" in plain_text
    unpoliced = shown.render(Context({"ref": "INC-42", "ns": f"{namespace}-other"}))
    assert "href" not in unpoliced and "INC-42" in unpoliced

    # The audit exports (CSV and JSON lines) carry the link beside the reference.
    scope = Filters(scopes=((namespace, frozenset()),))
    entries = with_approvers(list(events(scope).filter(proposal=proposal)))
    assert entries
    with_evidence_links(entries, {})
    for row in map(as_row, entries):
        assert row["evidence_ref"] == "INC-42"
        assert row["evidence_url"] == "https://tracker.example.com/browse/INC-42"


def test_a_batch_decision_is_held_to_the_namespaces_pattern(namespace: str) -> None:
    from django.utils import timezone

    from orbit_console.decisions.batches import ProposalRefused, batch_decide
    from orbit_console.decisions.models import Batch

    author = person(namespace, "operator")
    now = timezone.now()
    batch = Batch.objects.create(
        action="review", namespace_id=namespace, created_by=author, created_at=now, verified_at=now
    )
    batch.items.create(task_id="t" * 32, seen_state="NEEDS_REVIEW")  # one eligible task
    decision = {"reason": "r", "evidence_ref": "free-text", "outcome": "SUCCEEDED", "result": "{}"}
    batch_decide(batch, person=author, decision=decision)  # no policy: as before
    evidence_policy_set(namespace_id=namespace, pattern=r"INC-\d+", example="INC-9")

    with pytest.raises(ProposalRefused, match="INC-9"):
        batch_decide(batch, person=author, decision=decision)
    batch_decide(batch, person=author, decision={**decision, "evidence_ref": "INC-10"})


def test_a_catastrophic_pattern_holds_no_page_issue_41(namespace: str) -> None:
    """``(a+)+`` took 6.3 s on a 26-character reference in Python's ``re``, doubling per
    character. Matched by RE2, the longest reference the API takes, built to make a backtracking
    engine try every way to split it, is judged at once by each place that checks or links one:
    the wizard, the proposal's page, a notification. (This test never ends on the old code.)"""
    call_command(
        "evidence", "set", namespace, "--pattern", "(a+)+", "--example", "aaa", "--link", TRACKER
    )
    hostile = "a" * (MAX_EVIDENCE_REF_CHARS - 1) + "!"

    refused = decide(hostile, namespace)
    assert not refused.is_valid() and "aaa" in str(refused.errors["evidence_ref"])
    assert "href" not in SHOWN.render(Context({"ref": hostile, "ns": namespace}))
    assert evidence_link(namespace, hostile) == ""
    assert decide("a" * MAX_EVIDENCE_REF_CHARS, namespace).is_valid()


@pytest.mark.parametrize(
    ("pattern", "construct"),
    [
        (r"(INC)-\1", "a backreference"),
        (r"(?=INC)INC-\d+", "a lookahead"),
        ("(?<=I)NC", "a lookbehind"),
    ],
)
def test_what_re2_cannot_express_is_refused_at_set_by_name(
    namespace: str, pattern: str, construct: str
) -> None:
    with pytest.raises(CommandError, match=f"RE2 cannot express {construct}"):
        call_command("evidence", "set", namespace, "--pattern", pattern, "--example", "INC-INC")
    assert policy_for(namespace) is None


def test_a_reference_longer_than_the_api_takes_is_never_matched_C10(namespace: str) -> None:
    """The API takes at most 512 characters (C10): the wizard's field says so with the count,
    and the policy's check and link refuse a longer one without trying the pattern on it."""
    evidence_policy_set(
        namespace_id=namespace, pattern=r"INC-(\d+)", example="INC-1", link_template=TRACKER
    )
    policy = policy_for(namespace)
    assert policy is not None
    overlong = "INC-" + "1" * MAX_EVIDENCE_REF_CHARS
    assert not matches(policy, overlong) and evidence_link(namespace, overlong) == ""
    assert not decide(overlong, namespace).is_valid()
    longest = overlong[:MAX_EVIDENCE_REF_CHARS]
    assert matches(policy, longest) and evidence_link(namespace, longest)

    with pytest.raises(PolicyRefused, match="the pattern is 201 characters long: at most 200"):
        evidence_policy_set(namespace_id=namespace, pattern="I" * 201, example="I")
    with pytest.raises(PolicyRefused, match="the example is no evidence reference"):
        evidence_policy_set(namespace_id=namespace, pattern="INC 1", example="INC 1")


def test_a_policy_re2_cannot_match_checks_nothing_and_says_so(namespace: str) -> None:
    """A pattern stored before patterns were RE2's, with a lookahead: rather than refuse every
    reference in the namespace, it checks none (as without a policy), and ``show`` marks it."""
    EvidencePolicy.objects.create(
        namespace_id=namespace,
        pattern=r"(?=INC)INC-(\d+)",
        example="INC-1",
        link_template=TRACKER,
        updated_at=timezone.now(),
    )
    assert decide("free-text", namespace).is_valid()
    assert evidence_link(namespace, "INC-1") == ""
    out = io.StringIO()
    call_command("evidence", "show", namespace, stdout=out)
    assert "NOT CHECKED: RE2 cannot match this pattern" in out.getvalue()
