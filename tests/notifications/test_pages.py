"""The notifications page, the person's choices and the administrators' delivery log
(issue 32)."""

from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from orbit_console.notifications import webhooks
from orbit_console.notifications.models import Preference, Recipient, WebhookMessage
from orbit_console.notifications.selectors import unread_count
from tests.notifications.conftest import person, propose


def client_of(user: Any) -> Client:
    client = Client()
    client.force_login(user)
    return client


def test_the_list_shows_the_notification_in_the_persons_language_and_marks_it_read(
    namespace: str,
) -> None:
    supervisor = person(namespace, "supervisor")
    proposal = propose(person(namespace, "operator"), namespace)
    client = client_of(supervisor)

    page = client.get("/notifications").content.decode()
    assert "A proposal waits for your approval" in page
    assert f'href="/proposals/{proposal.id}"' in page
    assert 'id="notify-count"' in page and "1 unread" in page
    chinese = client.get("/notifications", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "有一项提议等待您批准" in chinese

    client.post("/notifications/read")
    assert unread_count(supervisor.pk) == 0
    assert Recipient.objects.get(user=supervisor).read_at is not None


def test_the_headers_counts_are_made_where_the_header_renders_not_for_every_fragment(
    namespace: str,
) -> None:
    """The page header says what is unread and what waits for approval; a fragment that has no
    header (here the one a supervisor's page asks for whenever an approval moves) does not pay
    for the header's counts. They were counted for every template rendered with a request."""
    supervisor = person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)
    client = client_of(supervisor)
    page = client.get("/notifications").content.decode()
    assert "1 unread" in page
    assert 'id="nav-waiting"' in page and 'data-count="1"' in page

    with CaptureQueriesContext(connection) as fragment:
        answer = client.get("/approvals/waiting", headers={"HX-Request": "true"})
    assert answer.status_code == 200
    assert 'data-count="1"' in answer.content.decode()
    queries = [query["sql"] for query in fragment.captured_queries]
    assert not [sql for sql in queries if Recipient._meta.db_table in sql]
    proposal_counts = [sql for sql in queries if "COUNT(" in sql and "console_proposal" in sql]
    assert len(proposal_counts) == 1, proposal_counts


def test_a_person_turns_email_off_for_a_kind_and_chooses_a_language(namespace: str) -> None:
    supervisor = person(namespace, "supervisor", email="s@example.test")
    client_of(supervisor).post(
        "/notifications/preferences", {"language": "zh-hans", "email": ["proposal.expired"]}
    )
    preference = Preference.objects.get(user=supervisor)
    assert preference.language == "zh-hans"
    assert "proposal.waiting" in preference.email_off_kinds
    assert "proposal.expired" not in preference.email_off_kinds

    proposal = propose(person(namespace, "operator"), namespace)

    recipient = Recipient.objects.get(user=supervisor, notification__proposal_id=proposal.id)
    assert (recipient.language, recipient.email_state) == ("zh-hans", "")


def test_administrators_see_the_delivery_log_and_replay(namespace: str, settings: Any) -> None:
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    endpoint, _ = webhooks.endpoint_add(
        namespace_id=namespace, url="http://127.0.0.1:9/hook", event_types=[]
    )
    person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)
    message = WebhookMessage.objects.get(endpoint=endpoint)
    WebhookMessage.objects.filter(id=message.id).update(state="failed", next_at=None)
    admin = person(namespace)
    admin.is_staff = True
    admin.save()

    assert (
        client_of(person(namespace, "supervisor")).get("/notifications/deliveries").status_code
        == 403
    )
    log = client_of(admin).get(f"/notifications/deliveries?endpoint={endpoint.id}")
    assert message.id in log.content.decode() and "failed" in log.content.decode()
    client_of(admin).post(f"/notifications/deliveries/{message.id}/replay")
    assert WebhookMessage.objects.get(id=message.id).state == "pending"


@pytest.mark.parametrize("value", ["9" * 5000, "9" * 20, "abc", "-1", "0", "1.5", ""])
def test_marking_read_with_a_value_that_is_no_notification_changes_nothing(
    namespace: str, value: str
) -> None:
    """Bad input gets a clear refusal and changes nothing: 5 000 digits answered 500, and a
    value that was not digits marked every notification read."""
    supervisor = person(namespace, "supervisor")
    propose(person(namespace, "operator"), namespace)

    answer = client_of(supervisor).post("/notifications/read", {"recipient": value})

    assert answer.status_code == 400
    assert unread_count(supervisor.pk) == 1


def test_marking_one_read_leaves_the_others_and_another_persons_alone(namespace: str) -> None:
    supervisor = person(namespace, "supervisor")
    other = person(namespace, "supervisor")
    author = person(namespace, "operator")
    propose(author, namespace)
    propose(author, namespace)
    mine = Recipient.objects.filter(user=supervisor).order_by("id").first()
    theirs = Recipient.objects.filter(user=other).order_by("id").first()
    assert mine is not None and theirs is not None

    answer = client_of(supervisor).post(
        "/notifications/read", {"recipient": [str(mine.id), str(theirs.id)]}
    )

    assert answer.status_code == 302
    assert (unread_count(supervisor.pk), unread_count(other.pk)) == (1, 2)


def test_replaying_an_unknown_message_is_not_found(namespace: str) -> None:
    admin = person(namespace)
    admin.is_staff = True
    admin.save()

    answer = client_of(admin).post("/notifications/deliveries/msg_nothing/replay")

    assert answer.status_code == 404
