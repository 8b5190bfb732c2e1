"""People with credentials in several namespaces (issue 13): who may see what across
namespaces follows the credentials, not the role. A person holds at most one credential per
namespace and sees and acts on exactly what those cover; an organisation-wide auditor is a
person holding a credential in every namespace, not a console-wide flag.

Over real HTTP against a real server, with two seeded namespaces ("east" and "west") and a
third that nobody here holds a credential for.
"""

import json
import re
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User

from orbit_console.decisions.models import ConsoleEvent, Submission
from orbit_console.decisions.submissions import submission_create
from orbit_console.ledger.auth import hash_token
from orbit_console.ledger.models import Credential, OperationAudit
from orbit_console.ledger.seed import seed_world
from orbit_console.lib.secretbox import unseal
from orbit_console.people.credentials import credential_drop, mint_embedded
from orbit_console.people.models import OrbitCredential
from tests.console.test_commands import console_user
from tests.console.web import Console, element, section, signed_in
from tests.support.orbit import REVIEW_REVISION, review_body
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer


@pytest.fixture
def worlds(live_db: None) -> dict[str, dict[str, Any]]:
    return {name: seed_world(label=name) for name in ("east", "west", "north")}


def holding(worlds: dict[str, dict[str, Any]], role: str, *names: str) -> TestPerson:
    """A person with ``role`` and a credential in each of the namespaces ``names``."""
    first, *others = names
    person = make_person(worlds[first], role)
    for name in others:
        mint_embedded(
            user=person.user, roles=person.roles, namespace_id=worlds[name]["namespace_id"]
        )
    return person


@pytest.fixture
def console_of(orbit_server: DaphneServer) -> Iterator[Any]:
    opened: list[Console] = []

    def sign_in(person: TestPerson) -> Console:
        opened.append(signed_in(orbit_server.url, person))
        return opened[-1]

    yield sign_in
    for console in opened:
        console.close()


def stored_decision(world: dict[str, Any], person: TestPerson, note: str) -> Submission:
    """A decision of ``person``'s about one of ``world``'s tasks, stored and not sent yet."""
    return submission_create(
        action="review",
        task_id=world["tasks"]["needs_review"],
        queue_id=world["queue_id"],
        namespace_id=world["namespace_id"],
        expected_revision=REVIEW_REVISION,
        body=json.dumps(review_body(reason=f"checked by hand: {note}")),
        created_by=person.user,
        note=note,
    ).submission


def test_task_pages_read_each_task_with_the_credential_of_its_namespace(
    worlds: dict[str, dict[str, Any]], console_of: Any
) -> None:
    auditor = holding(worlds, "auditor", "east", "west")
    console = console_of(auditor)
    for name in ("east", "west"):
        task_id = worlds[name]["tasks"]["needs_review"]
        operation = OperationAudit.objects.filter(task_id=task_id).values_list("id", flat=True)[0]
        for path in (
            f"/tasks/{task_id}",
            f"/tasks/{task_id}/timeline/older",
            f"/tasks/{task_id}/operations/{operation}",
        ):
            assert console.get(path).status_code == 200, path
    outside = worlds["north"]["tasks"]["needs_review"]
    assert console.get(f"/tasks/{outside}").status_code == 404
    assert console.get(f"/tasks/{outside}/timeline/older").status_code == 404


def test_the_explorer_shows_every_namespace_the_reader_holds_a_credential_in(
    worlds: dict[str, dict[str, Any]], console_of: Any
) -> None:
    decisions = {
        name: stored_decision(worlds[name], make_person(worlds[name], "operator"), name)
        for name in ("east", "west", "north")
    }
    everywhere = console_of(holding(worlds, "auditor", "east", "west"))
    east_only = console_of(holding(worlds, "auditor", "east"))

    def shown(console: Console) -> set[str]:
        page = console.get("/audit?kind=submission.stored")
        assert page.status_code == 200, page.text
        return {name for name, decision in decisions.items() if decision.id in page.text}

    assert shown(everywhere) == {"east", "west"}
    assert shown(east_only) == {"east"}


def test_an_export_is_recorded_in_every_namespace_it_covered(
    worlds: dict[str, dict[str, Any]], console_of: Any
) -> None:
    auditor = holding(worlds, "auditor", "east", "west")
    exported = console_of(auditor).get("/audit/export.jsonl")
    assert exported.status_code == 200
    recorded = ConsoleEvent.objects.filter(kind="audit.exported", actor=auditor.user)
    assert sorted(recorded.values_list("namespace_id", flat=True)) == sorted(
        worlds[name]["namespace_id"] for name in ("east", "west")
    )


def test_the_work_queue_lists_one_namespace_at_a_time_and_offers_the_others(
    worlds: dict[str, dict[str, Any]], console_of: Any
) -> None:
    operator = holding(worlds, "operator", "east", "west")
    console = console_of(operator)
    east, west = (worlds[name]["namespace_id"] for name in ("east", "west"))
    first, second = east, west  # offered by name: "east namespace", then "west namespace"
    page = console.get("/")
    choice = element(page.text, r'<select name="namespace".*?</select>')
    options = re.findall(r'<option value="([0-9a-f]{32})"[^>]*>([^<]*)</option>', choice)
    assert options == [(east, "east namespace"), (west, "west namespace")]

    def listed(html: str) -> set[str]:
        review = section(html, "review")
        return {name for name in worlds if worlds[name]["tasks"]["needs_review"] in review}

    name_of = {east: "east", west: "west"}
    assert listed(page.text) == {name_of[first]}
    assert listed(console.get(f"/?namespace={second}").text) == {name_of[second]}
    # A namespace the person holds no credential in is not a choice.
    north = worlds["north"]["namespace_id"]
    refused = console.get(f"/?namespace={north}")
    assert refused.status_code == 200 and listed(refused.text) == {name_of[first]}
    assert "errorlist" in refused.text

    single = console_of(holding(worlds, "operator", "east"))
    assert 'name="namespace"' not in single.get("/").text


def test_a_decision_is_sent_with_the_credential_of_its_tasks_namespace(
    worlds: dict[str, dict[str, Any]], console_of: Any
) -> None:
    """The platform's audit names the person through the credential of the task's namespace
    (AU6), whichever of theirs sorts first."""
    operator = holding(worlds, "operator", "east", "west")
    credentials = {
        c.namespace_id: c.actor_id for c in OrbitCredential.objects.filter(user=operator.user)
    }
    console = console_of(operator)
    for name in ("east", "west"):
        world = worlds[name]
        decision = stored_decision(world, operator, name)
        page = console.post(
            f"/submissions/{decision.id}/resend",
            [("csrfmiddlewaretoken", console.csrf_token())],
        )
        assert page.status_code == 303, page.text
        decision.refresh_from_db()
        assert decision.state == "succeeded", decision.error_message
        review = OperationAudit.objects.get(task_id=decision.task_id, action="task.review")
        assert review.actor_id == credentials[world["namespace_id"]]


def test_a_decision_whose_sender_lost_that_namespace_is_not_sent_with_another(
    worlds: dict[str, dict[str, Any]], console_of: Any
) -> None:
    operator = holding(worlds, "operator", "east", "west")
    decision = stored_decision(worlds["west"], operator, "west")
    credential_drop(user=operator.user, namespace_id=worlds["west"]["namespace_id"])
    console = console_of(operator)
    page = console.post(
        f"/submissions/{decision.id}/resend", [("csrfmiddlewaretoken", console.csrf_token())]
    )
    assert page.status_code == 404  # the task is not theirs to see any more
    decision.refresh_from_db()
    assert decision.send_count == 0
    assert not OperationAudit.objects.filter(
        task_id=decision.task_id, action="task.review"
    ).exists()


def test_console_user_mints_one_credential_per_namespace_and_drops_one(
    worlds: dict[str, dict[str, Any]],
) -> None:
    east, west = (worlds[name]["namespace_id"] for name in ("east", "west"))
    done = console_user("oona", "--role", "auditor", "--namespace", east, "--namespace", west)
    assert done.returncode == 0, done.stderr
    user = User.objects.get(username="oona")
    held = {c.namespace_id: c for c in OrbitCredential.objects.filter(user=user)}
    assert set(held) == {east, west}

    again = console_user("oona", "--role", "auditor", "--namespace", west)  # replaces west's only
    assert again.returncode == 0, again.stderr
    after = {c.namespace_id: c for c in OrbitCredential.objects.filter(user=user)}
    assert after[east].token_ciphertext == held[east].token_ciphertext
    assert after[west].token_ciphertext != held[west].token_ciphertext

    dropped = console_user("oona", "--role", "auditor", "--drop-namespace", east)
    assert dropped.returncode == 0, dropped.stderr
    assert list(
        OrbitCredential.objects.filter(user=user).values_list("namespace_id", flat=True)
    ) == [west]
    revoked = Credential.objects.get(token_hash=hash_token(unseal(held[east].token_ciphertext)))
    assert revoked.revoked_at is not None

    nothing = console_user("oona", "--role", "auditor", "--drop-namespace", east)
    assert nothing.returncode != 0 and "holds no credential in namespace" in nothing.stderr
