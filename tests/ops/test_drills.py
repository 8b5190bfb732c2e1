"""Fast subsets of the drills of issue 34 (the drills themselves: ``bench/drills/``, their
figures: docs/reliability.md).

Credential rotation: the moment of a rolling rotation when one console replica already signs
with the new keys and the other still signs with the old ones (both accepting both). A person
signed in on one walks a wizard on the other, confirms on the first and opens pages on both:
never sent to sign in, the decision applied once; then ``keys reseal`` leaves the old token key
needed by nothing. The full drill restarts two replicas, the reconciler and the API three times
under load: ``bench/drills/rotation.py``."""

import io
import json
import secrets
from collections.abc import Iterator
from contextlib import redirect_stdout, suppress
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.conf import settings as django_settings
from django.core.management import call_command
from pytest_django.fixtures import Settings as SettingsWrapper

from orbit_console.ledger.models import OperationAudit
from orbit_console.lib import secretbox
from tests.console.web import Console, review_values, wizard_submit, wizard_to_confirm
from tests.support.people import make_person
from tests.support.servers import DaphneServer
from tests.support.threads import at_once

SIGNED_OUT = "/signin"


@pytest.fixture
def old_token_key(settings: SettingsWrapper) -> Iterator[str]:
    """The test run's people get tokens sealed under this key (the "old" one)."""
    key = Fernet.generate_key().decode()
    settings.ORBIT_TOKEN_KEYS = [key]
    yield key


def signed_in_on(console: Console, url: str, path: str) -> bool:
    console.http.base_url = url
    page = console.get(path)
    return not (page.status_code in (302, 303) and SIGNED_OUT in page.headers.get("location", ""))


def test_mid_rotation_two_replicas_with_different_keys_keep_people_signed_in_and_decide(
    settings: SettingsWrapper, old_token_key: str, world: dict[str, Any], live_db: None
) -> None:
    old_secret = django_settings.SECRET_KEY
    new_secret, new_token_key = secrets.token_urlsafe(50), Fernet.generate_key().decode()
    common = {"CONSOLE_REVIEW_APPROVAL": "off", "CONSOLE_RETRY_APPROVAL": "off"}
    accepting = DaphneServer(
        "rotation-accept",
        env={
            **common,
            "SECRET_KEY": old_secret,
            "SECRET_KEY_FALLBACKS": new_secret,
            "ORBIT_TOKEN_KEYS": f"{old_token_key},{new_token_key}",
        },
    )
    using = DaphneServer(
        "rotation-use",
        env={
            **common,
            "SECRET_KEY": new_secret,
            "SECRET_KEY_FALLBACKS": old_secret,
            "ORBIT_TOKEN_KEYS": f"{new_token_key},{old_token_key}",
        },
    )
    operator = make_person(world, "operator")
    task_id = world["tasks"]["needs_review"]
    try:
        at_once(DaphneServer.start, [accepting, using])
        with Console(using.url) as console:
            console.sign_in(operator)  # signed in under the new SECRET_KEY
            console.http.base_url = accepting.url  # the wizard on the replica of the old one
            confirm = wizard_to_confirm(console, task_id, "review", review_values())
            console.http.base_url = using.url
            sent = wizard_submit(console, task_id, "review", confirm.text)
            assert sent.status_code == 303, sent.text
            assert sent.headers["location"].startswith("/submissions/")
            for url in (accepting.url, using.url, accepting.url):
                assert signed_in_on(console, url, "/"), f"sent to sign in on {url}"
    finally:
        accepting.stop()
        using.stop()
    assert OperationAudit.objects.filter(task_id=task_id, action="task.review").count() == 1

    settings.ORBIT_TOKEN_KEYS = [new_token_key, old_token_key]
    with suppress(SystemExit):  # exit 1 when other tests' rows open with no key set here
        call_command("keys", "reseal", stdout=io.StringIO())
    out = io.StringIO()
    with redirect_stdout(out), suppress(SystemExit):  # exit 1 while anything needs an old key
        call_command("keys", "retire-check", "--json", stdout=out)
    report = json.loads(out.getvalue())
    old = next(k for k in report["keys"] if k["key_id"] == secretbox.key_id(old_token_key))
    assert old["retirable"], old
