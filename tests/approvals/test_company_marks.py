"""Company people are marked wherever a person is named (issue 39, item 4; docs/sign-in.md):
the approvals, a proposal's page, the audit explorer and its export, the task's timeline (the
console's entries and the platform's), the notifications — in both languages. In process."""

import csv
import io
from typing import Any

from asgiref.sync import async_to_sync
from django.test import AsyncClient, Client

from orbit_console.decisions.proposals import proposal_approve
from orbit_console.people.accounts import account_company
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import actor_names, is_company_actor
from orbit_console.timeline.entries import from_event
from tests.approvals.conftest import pending_retry
from tests.support.people import TestPerson, make_person

MARK = '<span class="flag company"'


def signed_in(person: TestPerson) -> Client:
    client = Client()
    client.force_login(person.user)
    return client


def exported(person: TestPerson, params: dict[str, str]) -> str:
    """The CSV export, streamed by an async view, read whole."""

    async def read() -> str:
        client = AsyncClient()
        await client.aforce_login(person.user)
        answer = await client.get("/audit/export.csv", params)
        return b"".join([chunk async for chunk in answer.streaming_content]).decode()

    return async_to_sync(read)()


def test_company_people_are_marked_wherever_they_are_named(
    world: dict[str, Any], crew: dict[str, TestPerson]
) -> None:
    company = make_person(world, "operator")
    account_company(user=company.user)
    proposal = pending_retry(world, company)
    supervisor, auditor = crew["supervisor"], crew["auditor"]
    name = company.username

    approvals = signed_in(supervisor).get("/approvals").content.decode()
    row = approvals[approvals.index(f'id="proposal-{proposal.id}"') :]
    assert f"{name} {MARK}" in row[: row.index("</tr>")]
    page = signed_in(supervisor).get(f"/proposals/{proposal.id}").content.decode()
    assert f"<dd>{name} {MARK}" in page  # "Proposed by"

    # The audit explorer, in both languages, and its export (in no language: " (company)").
    reader = signed_in(auditor)
    explorer = reader.get("/audit", {"person": name}).content.decode()
    assert f'<span class="person">{name} {MARK}' in explorer
    chinese = reader.get("/audit", {"person": name}, HTTP_ACCEPT_LANGUAGE="zh-hans")
    assert ">企业</span>" in chinese.content.decode()
    rows = list(csv.DictReader(io.StringIO(exported(auditor, {"person": name}))))
    assert rows and {row["person"] for row in rows} == {f"{name} (company)"}

    # The timeline: the console's entry (as the page builds it, as a live push carries it).
    event = proposal.events.get(kind="proposal.proposed")
    entry = from_event(event.as_message_data())
    assert entry.actor == name and entry.company_names == {name}
    task = signed_in(supervisor).get(f"/tasks/{proposal.task_id}").content.decode()
    entry_html = task[task.index(f'id="entry-ev-{event.id}"') :]
    assert MARK in entry_html[: entry_html.index("</li>")]

    # The platform's entries: the actor behind a company person's credential.
    credential = OrbitCredential.objects.get(user=company.user)
    assert async_to_sync(actor_names)({credential.actor_id}) == {credential.actor_id: name}
    assert is_company_actor(credential.actor_id)


def test_a_company_supervisors_approval_is_marked_in_the_proposers_notification(
    world: dict[str, Any], crew: dict[str, TestPerson]
) -> None:
    approver = make_person(world, "supervisor")
    account_company(user=approver.user)
    proposal = pending_retry(world, crew["operator"])
    proposal_approve(proposal_id=proposal.id, approver=approver.user)
    proposer = signed_in(crew["operator"])
    english = proposer.get("/notifications").content.decode()
    assert f"By: {approver.username} (company)" in english
    chinese = proposer.get("/notifications", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert f"{approver.username}（企业账号）" in chinese  # noqa: RUF001 -- the translation's own brackets
