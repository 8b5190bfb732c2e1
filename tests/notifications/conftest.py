"""People and proposals for the notifications' tests: each test works in a namespace of its
own on the shared test database (nothing is rolled back, ``live_db``)."""

import email
import json
import secrets
import socket
import time
from collections.abc import Callable, Iterator
from email.message import Message
from typing import Any

import pytest
from aiosmtpd.controller import Controller
from django.contrib.auth.models import Group, User

from orbit_console.decisions.models import Proposal
from orbit_console.decisions.proposals import proposal_create
from orbit_console.lib.ids import new_id
from orbit_console.lib.secretbox import seal
from orbit_console.people.models import OrbitCredential
from tests.support.receivers import Receiver


def person(namespace_id: str, *roles: str, email: str = "") -> User:
    user = User.objects.create_user(
        username=f"{'-'.join(roles) or 'nobody'}-{secrets.token_hex(4)}",
        password=secrets.token_urlsafe(12),
        email=email,
    )
    for role in roles:
        user.groups.add(Group.objects.get_or_create(name=role)[0])
    OrbitCredential.objects.create(
        user=user, token_ciphertext=seal("not-a-token"), namespace_id=namespace_id
    )
    return user


def propose(author: User, namespace_id: str) -> Proposal:
    body = json.dumps({"outcome": "SUCCEEDED", "reason": "checked", "evidence": "INC-1"})
    return proposal_create(
        action="review",
        task_id=f"task-{new_id()}",
        expected_revision="3",
        body=body,
        proposed_by=author,
        namespace_id=namespace_id,
    ).proposal


@pytest.fixture
def namespace(live_db: None) -> str:
    return f"ns-{new_id()}"


@pytest.fixture
def quick_webhooks(settings: Any) -> Any:
    settings.CONSOLE_WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    settings.CONSOLE_WEBHOOK_BACKOFF_SECONDS = 0
    settings.CONSOLE_WEBHOOK_BACKOFF_MAX_SECONDS = 0
    settings.CONSOLE_WEBHOOK_TIMEOUT = 1
    settings.CONSOLE_WEBHOOK_CONNECT_TIMEOUT = 1
    settings.CONSOLE_WEBHOOK_MAX_ATTEMPTS = 4
    return settings


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    found = Receiver(secrets=[]).start()
    yield found
    found.stop()


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


class Inbox:
    """What a real SMTP server (aiosmtpd) received, and when."""

    def __init__(self) -> None:
        self.messages: list[Message] = []
        self.received_at: list[float] = []

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:
        self.messages.append(email.message_from_bytes(envelope.content))
        self.received_at.append(time.time())
        return "250 OK"


@pytest.fixture
def smtp(settings: Any) -> Iterator[Inbox]:
    inbox = Inbox()
    with socket.socket() as probe:  # a free port: aiosmtpd checks its own by connecting to it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    controller = Controller(inbox, hostname="127.0.0.1", port=port)
    controller.start()
    settings.MAILERS = {
        "default": {
            "BACKEND": "django.core.mail.backends.smtp.EmailBackend",
            "OPTIONS": {"host": "127.0.0.1", "port": controller.port, "timeout": 5},
        }
    }
    yield inbox
    controller.stop()
