"""Four eyes (issue 5): servers with the production approval policy, people minted under it, and
helpers to propose and decide over real HTTP.

The test run switches approvals off by default (``tests/support/environment.py``) so that the
suites of issue 3 submit directly. Here the servers run with the production default (approval
required), and the people are minted under the same policy: operators hold ``tasks:read`` only,
supervisors ``tasks:read``, ``tasks:review`` and ``tasks:retry``.
"""

import re
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orbit_console.decisions.models import Proposal, Submission
from orbit_console.decisions.proposals import proposal_create
from tests.console.web import (
    Console,
    element,
    pre_text,
    review_values,
    text_of,
    wizard_submit,
    wizard_to_confirm,
)
from tests.support.orbit import RETRY_REVISION, bearer
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer

APPROVALS_ON = {"CONSOLE_REVIEW_APPROVAL": "required", "CONSOLE_RETRY_APPROVAL": "required"}


def required_policy(approvers: int = 1) -> dict[str, dict[str, Any]]:
    """``settings.CONSOLE_APPROVAL_POLICY`` as the production default computes it."""
    return {action: {"required": True, "approvers": approvers} for action in ("review", "retry")}


# As the production default computes them when both actions need approval (settings.py).
REQUIRED_ROLE_PERMISSIONS = {
    "operator": ["tasks:read", "tasks:audit:read"],
    "supervisor": ["tasks:read", "tasks:audit:read", "tasks:review", "tasks:retry"],
    "auditor": ["tasks:read", "tasks:audit:read"],
}


def start_server(name: str, django_db_blocker: Any, **env: str) -> DaphneServer:
    with django_db_blocker.unblock():
        return DaphneServer(name, env={**APPROVALS_ON, **env}).start()


def pending_retry(world: dict[str, Any], proposer: TestPerson) -> Proposal:
    """A retry of ``world``'s FAILED task proposed by ``proposer``, waiting for approval (made
    directly, not through a console)."""
    return proposal_create(
        action="retry",
        task_id=world["tasks"]["failed"],
        queue_id=world["queue_id"],
        namespace_id=world["namespace_id"],
        expected_revision=RETRY_REVISION,
        body="{}",
        proposed_by=proposer.user,
    ).proposal


def serve(name: str, django_db_blocker: Any, **env: str) -> Iterator[DaphneServer]:
    """A fixture's body: a server of its own with approval required, stopped after its scope."""
    server = start_server(name, django_db_blocker, **env)
    yield server
    server.stop()


def mint_crew(settings: Any, world: dict[str, Any], **roles: str) -> dict[str, TestPerson]:
    """People of ``world``'s namespace (name=role), minted under the required policy, which the
    test process follows too."""
    settings.CONSOLE_APPROVAL_POLICY = required_policy()
    settings.CONSOLE_ROLE_PERMISSIONS = REQUIRED_ROLE_PERMISSIONS
    return {name: make_person(world, role) for name, role in roles.items()}


@pytest.fixture(scope="session")
def approvals_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """API and console with approval required for reviews and retries, one approver."""
    yield from serve("approvals", django_db_blocker)


@pytest.fixture(scope="session")
def approvals_server_2(
    approvals_server: DaphneServer, django_db_blocker: Any
) -> Iterator[DaphneServer]:
    """A second process with the same policy on the same database, for real races."""
    yield from serve("approvals-2", django_db_blocker)


@pytest.fixture(scope="session")
def threshold_server(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """Approval required, by two distinct supervisors."""
    yield from serve("approvals-threshold", django_db_blocker, CONSOLE_REVIEW_APPROVERS="2")


@pytest.fixture
def approval_policy(settings: Any) -> dict[str, dict[str, Any]]:
    """The production policy in the test process too: credentials minted now carry the
    permissions of the required policy, and direct service calls follow it."""
    settings.CONSOLE_APPROVAL_POLICY = required_policy()
    settings.CONSOLE_ROLE_PERMISSIONS = REQUIRED_ROLE_PERMISSIONS
    policy: dict[str, dict[str, Any]] = settings.CONSOLE_APPROVAL_POLICY
    return policy


@pytest.fixture
def crew(approval_policy: dict[str, Any], world: dict[str, Any]) -> dict[str, TestPerson]:
    """People of ``world``'s namespace, minted under the required policy."""
    return {
        "operator": make_person(world, "operator"),
        "operator_2": make_person(world, "operator"),
        "supervisor": make_person(world, "supervisor"),
        "supervisor_2": make_person(world, "supervisor"),
        "auditor": make_person(world, "auditor"),
    }


@pytest.fixture
def approvals_api(approvals_server: DaphneServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=approvals_server.url, timeout=60) as client:
        yield client


# --- Helpers ----------------------------------------------------------------------------------


def proposal_id_of(response: httpx.Response) -> str:
    """The proposal a completed wizard (or a decision) redirected to."""
    assert response.status_code == 303, f"{response.status_code}: {text_of(response.text)}"
    match = re.fullmatch(r"/proposals/([0-9a-f]{32})", response.headers["location"])
    assert match is not None, response.headers["location"]
    return match.group(1)


def propose_review(console: Console, task_id: str, **decide: str) -> tuple[str, str]:
    """Walk the review wizard to its end as a person who must propose: the proposal's id and
    the exact body the confirm step showed."""
    confirm = wizard_to_confirm(console, task_id, "review", review_values(**decide))
    body = pre_text(confirm.text, r'<pre id="request-body">.*?</pre>')
    return proposal_id_of(wizard_submit(console, task_id, "review", confirm.text)), body


def decide(console: Console, proposal_id: str, verb: str, **fields: str) -> httpx.Response:
    """POST ``/proposals/<id>/<verb>`` with the session's CSRF token, as a crafted request would:
    whether the page offered the button or not."""
    token = console.csrf_token()
    data = [("csrfmiddlewaretoken", token), *fields.items()]
    return console.post(f"/proposals/{proposal_id}/{verb}", data)


def messages_of(html: str) -> str:
    """The text of the flash messages shown on a page ("" when there are none)."""
    match = re.search(r'<ul class="messages".*?</ul>', html, re.DOTALL)
    return text_of(match.group(0)) if match else ""


def history_of(html: str) -> str:
    """The text of a proposal page's history."""
    return text_of(element(html, r'<ol class="timeline" id="proposal-history">.*?</ol>'))


def assert_nothing_sent(api: httpx.Client, world: dict[str, Any], task_id: str) -> None:
    """No submission was stored for the task and the platform recorded no review of it."""
    assert not Submission.objects.filter(task_id=task_id).exists()
    assert task_records(api, world, task_id) == []


def task_records(
    api: httpx.Client, world: dict[str, Any], task_id: str, action: str = "task.review"
) -> list[dict[str, Any]]:
    """The platform's audit records of a task for ``action``, read with the admin token (AU2)."""
    response = api.get(f"/v1/tasks/{task_id}/operations", headers=bearer(world["tokens"]["admin"]))
    assert response.status_code == 200, response.text
    items: list[dict[str, Any]] = response.json()["data"]["items"]
    return [item for item in items if item["action"] == action]
