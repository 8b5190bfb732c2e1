"""People and proposals for the notifications' tests: each test works in a namespace of its
own on the shared test database (nothing is rolled back, ``live_db``)."""

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
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
