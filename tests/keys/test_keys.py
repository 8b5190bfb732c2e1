"""Rotating the console's keys (issue 34, drill 1): ``SECRET_KEY_FALLBACKS`` keeps people
signed in, on pages and on sockets; ``manage.py keys retire-check`` says what still needs an old
key and ``manage.py keys reseal`` moves stored tokens to the new one. The whole drill, with two
replicas restarted under load: ``bench/drills/rotation.py`` (docs/reliability.md)."""

import asyncio
import io
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import redirect_stdout, suppress
from typing import Any

import pytest
from channels.testing import WebsocketCommunicator
from cryptography.fernet import Fernet
from django.contrib.sessions.models import Session
from django.core.management import call_command
from django.test import Client
from pytest_django.fixtures import Settings as SettingsWrapper

from orbit_console.asgi import application
from orbit_console.console.consumers import rows_token
from orbit_console.keys import usage
from orbit_console.lib import secretbox
from orbit_console.lib.secretbox import seal, unseal
from orbit_console.people.models import OrbitCredential
from tests.support.people import make_person
from tests.timeline.helpers import socket_headers

OLD_SECRET = "drill-old-secret-key-" + "o" * 40
NEW_SECRET = "drill-new-secret-key-" + "n" * 40


@pytest.fixture
def token_keys(settings: SettingsWrapper) -> Iterator[list[str]]:
    keys = [Fernet.generate_key().decode() for _ in range(2)]
    yield keys


def retire_check() -> tuple[int, dict[str, Any]]:
    import json

    out = io.StringIO()
    code = 0
    with redirect_stdout(out):
        try:
            call_command("keys", "retire-check", "--json", stdout=out)
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    return code, json.loads(out.getvalue())


def uses_of(report: dict[str, Any], kind: str, key_id: str) -> dict[str, Any]:
    return next(k for k in report["keys"] if k["kind"] == kind and k["key_id"] == key_id)


def test_settings_read_secret_key_fallbacks_from_the_environment() -> None:
    """Without ``SECRET_KEY_FALLBACKS`` in the environment a rotation of ``SECRET_KEY`` signs
    everyone out: the settings must read it."""
    env = {**os.environ, "SECRET_KEY": NEW_SECRET, "SECRET_KEY_FALLBACKS": f"{OLD_SECRET},x"}
    code = "from django.conf import settings; print(settings.SECRET_KEY_FALLBACKS)"
    shown = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        env={**env, "DJANGO_SETTINGS_MODULE": "orbit_console.settings"},
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert shown.strip() == repr([OLD_SECRET, "x"])


def test_an_old_token_key_is_needed_until_the_tokens_are_sealed_again(
    settings: SettingsWrapper, token_keys: list[str], db: None
) -> None:
    old, new = token_keys
    settings.ORBIT_TOKEN_KEYS = [old]
    from django.contrib.auth.models import User

    user = User.objects.create_user(username="rotating-token-person")
    OrbitCredential.objects.create(
        user=user,
        namespace_id="ns-keys",
        namespace_name="keys",
        token_ciphertext=seal("orbit-token-of-the-person"),
        actor_id="actor",
        permissions="",
        queue_ids="",
    )
    settings.ORBIT_TOKEN_KEYS = [new, old]  # the new key first, the old one still decrypts
    old_id, new_id = secretbox.key_id(old), secretbox.key_id(new)

    code, report = retire_check()
    assert code == 1
    old_use = uses_of(report, "ORBIT_TOKEN_KEYS", old_id)
    assert old_use["role"] == "old"
    assert old_use["needed_by"]["Orbit tokens of people"] >= 1
    assert "reseal" in old_use["advice"]

    with suppress(SystemExit):  # exit 1 when other tests' rows open with no key set here
        call_command("keys", "reseal", stdout=io.StringIO())

    _, report = retire_check()
    assert uses_of(report, "ORBIT_TOKEN_KEYS", old_id)["retirable"]
    assert uses_of(report, "ORBIT_TOKEN_KEYS", new_id)["role"] == "current"
    settings.ORBIT_TOKEN_KEYS = [new]  # the old key retired: the token still opens
    stored = OrbitCredential.objects.get(user=user)
    assert unseal(stored.token_ciphertext) == "orbit-token-of-the-person"


def test_a_session_signed_under_the_old_secret_key_stays_signed_in_and_moves_to_the_new(
    settings: SettingsWrapper, db: None
) -> None:
    from django.contrib.auth.models import User

    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD_SECRET, []
    user = User.objects.create_user(username="rotating-secret-person", password="pw-" + "x" * 20)
    browser = Client()
    browser.force_login(user)
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_SECRET, [OLD_SECRET]
    old_id = usage.secret_key_id(OLD_SECRET)

    assert keyuse_needed(old_id) == 1
    page = browser.get("/")
    assert page.wsgi_request.user.is_authenticated, page.status_code  # not sent to sign in
    assert keyuse_needed(old_id) == 0  # re-signed under the new key by that page
    settings.SECRET_KEY_FALLBACKS = []
    assert browser.get("/").wsgi_request.user.is_authenticated


def keyuse_needed(key_id: str) -> int:
    return sum(
        use.needed_by.get("live sessions", 0) for use in usage.secret_keys() if use.key_id == key_id
    )


def test_a_socket_opened_with_a_session_of_the_old_secret_key_is_not_signed_out(
    settings: SettingsWrapper, world: dict[str, Any], live_db: None
) -> None:
    """Channels' own authentication flushed such a session: the person's first socket on a
    replica with the new key signed them out everywhere."""
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = OLD_SECRET, []
    operator = make_person(world, "operator")
    browser = Client()
    browser.force_login(operator.user)
    cookie = browser.cookies["sessionid"].value
    settings.SECRET_KEY, settings.SECRET_KEY_FALLBACKS = NEW_SECRET, [OLD_SECRET]
    token = rows_token(operator.user.pk, [world["tasks"]["needs_review"]])

    async def scenario() -> bool:
        headers = socket_headers(origin="http://127.0.0.1", session=cookie)
        socket = WebsocketCommunicator(application, f"/ws/queue?rows={token}", headers=headers)
        connected, _ = await socket.connect(timeout=20)
        quiet = bool(await socket.receive_nothing(timeout=1))
        await socket.disconnect()
        return connected and quiet

    assert asyncio.run(scenario()), "the socket was closed"
    assert Session.objects.filter(session_key=cookie).exists(), "the session was flushed"


def test_an_old_audit_key_is_kept_on_purpose_and_asks_nothing(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key that linked the records, once a new one links: needed for ever (records are
    never re-linked), and nothing for its operator to do."""
    from orbit_console.lib import auditkeys

    linked = auditkeys.current_key_id()
    monkeypatch.setattr(auditkeys, "key_ids", lambda: ["0" * 16, linked])
    old = next(use for use in usage.audit_keys() if use.key_id == linked)
    assert old.role == "old"
    assert old.needed and not old.retirable
    assert old.action == ""


@pytest.mark.parametrize(
    ("report", "code", "last_line"),
    [
        (
            [
                usage.KeyUse("ORBIT_AUDIT_KEYS", "b" * 16, "current"),
                usage.KeyUse("ORBIT_AUDIT_KEYS", "a" * 16, "old", {"API audit records": 3}),
                usage.KeyUse(
                    "SECRET_KEY / SECRET_KEY_FALLBACKS", "c" * 16, "old", {"live sessions": 2}
                ),
            ],
            0,
            "nothing to do now; old keys kept: 2",
        ),
        (
            [
                usage.KeyUse("ORBIT_AUDIT_KEYS", "a" * 16, "old", {"API audit records": 3}),
                usage.KeyUse("ORBIT_TOKEN_KEYS", "d" * 16, "old", {}, action=usage.REMOVE),
            ],
            1,
            f"to do now: 1 (remove {'d' * 16})",
        ),
    ],
    ids=["only-kept-on-purpose", "one-to-remove"],
)
def test_retire_checks_exit_status_says_whether_something_is_to_be_done_now(
    report: list[usage.KeyUse], code: int, last_line: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 41: it exited 1 while any old key was needed, and an old audit key is needed for
    ever by design, so after the first rotation it exited 1 for ever and no script could use
    it. Now 1 means "act now" (reseal, remove, put back, take a private key out); keys kept on
    purpose, and an old SECRET_KEY whose sessions move on by themselves, ask nothing."""
    from orbit_console.keys.management.commands import keys as command

    monkeypatch.setattr(command, "retire_report", lambda: report)
    out = io.StringIO()
    exited = 0
    try:
        call_command("keys", "retire-check", stdout=out)
    except SystemExit as exit_:
        exited = int(exit_.code or 0)
    assert exited == code
    assert out.getvalue().strip().splitlines()[-1] == last_line
