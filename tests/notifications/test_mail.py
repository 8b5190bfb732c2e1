"""Email through a real SMTP server (aiosmtpd, issue 32): each person in their language, and
not for the kinds they turned off."""

from email.message import Message
from typing import Any

from orbit_console.notifications import mail
from orbit_console.notifications.models import Preference, Recipient
from tests.notifications.conftest import Inbox, person, propose


def body_of(message: Message) -> str:
    payload = message.get_payload(decode=True)
    assert isinstance(payload, bytes)
    return payload.decode(message.get_content_charset() or "utf-8")


def test_each_supervisor_is_emailed_in_their_language_unless_they_turned_it_off(
    namespace: str, smtp: Inbox
) -> None:
    english = person(namespace, "supervisor", email="en@example.test")
    chinese = person(namespace, "supervisor", email="zh@example.test")
    Preference.objects.create(user=chinese, language="zh-hans")
    quiet = person(namespace, "supervisor", email="quiet@example.test")
    Preference.objects.create(user=quiet, email_off="proposal.waiting")
    proposal = propose(person(namespace, "operator"), namespace)

    while mail.deliver_due():
        pass

    by_address = {m["To"]: m for m in smtp.messages if proposal.id in body_of(m)}
    assert set(by_address) == {"en@example.test", "zh@example.test"}
    assert "A proposal waits for your approval" in str(by_address["en@example.test"]["Subject"])
    assert f"/proposals/{proposal.id}" in body_of(by_address["en@example.test"])
    zh = by_address["zh@example.test"]
    assert "A proposal waits" not in body_of(zh) and proposal.id in body_of(zh)
    states = dict(
        Recipient.objects.filter(notification__proposal_id=proposal.id).values_list(
            "user_id", "email_state"
        )
    )
    assert states == {english.pk: "sent", chinese.pk: "sent", quiet.pk: ""}


def test_an_smtp_server_that_is_down_is_tried_again(namespace: str, settings: Any) -> None:
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": 9, "timeout": 1},
        }
    }
    person(namespace, "supervisor", email="s@example.test")
    proposal = propose(person(namespace, "operator"), namespace)

    mail.deliver_due()

    [recipient] = Recipient.objects.filter(notification__proposal_id=proposal.id)
    assert recipient.email_state == "pending" and recipient.email_attempts == 1
    assert recipient.email_next_at is not None
