"""Sign-in protection (issues 7 and 13): django-axes refuses sign-in after repeated failures —
for one user name from one address, for one user name from many addresses, and from one
address for many user names (console/throttle.py) — a sign-in rotates the session key, and the
session cookie is HttpOnly, lives only as long as the browser and expires on the server after
``SESSION_COOKIE_AGE``.

The server reads the client's address from X-Forwarded-For, as behind the reverse proxy, so
that each test signs in from addresses of its own: failures counted per address must not spill
from one test into another."""

import secrets
from collections.abc import Iterator
from datetime import timedelta
from http.cookies import SimpleCookie
from typing import Any

import httpx
import pytest
from axes.models import AccessAttempt
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.utils import timezone

from tests.console.web import Console, csrf_token_of, form_with, text_of
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer
from tests.support.settings import PRODUCTION_PASSWORD_HASHERS

SESSION_AGE_SECONDS = 3600  # not the default (8 hours): the server's setting is what counts
FAILURE_LIMIT = 5  # AXES_FAILURE_LIMIT's default
USERNAME_LIMIT = 10  # AXES_USERNAME_FAILURE_LIMIT's default
ADDRESS_LIMIT = 10  # AXES_ADDRESS_FAILURE_LIMIT's default
LOCKED_OUT = "Signing in is paused"


@pytest.fixture(autouse=True)
def production_hashers(settings: Any) -> None:
    """Signing in is tested with the production's password hashing (Argon2id), not the fast
    hasher the rest of the suite gives its people (``tests/support/settings.py``)."""
    settings.PASSWORD_HASHERS = PRODUCTION_PASSWORD_HASHERS


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    with django_db_blocker.unblock():
        env = {
            "SESSION_COOKIE_AGE": str(SESSION_AGE_SECONDS),
            "DJANGO_SETTINGS_MODULE": "orbit_console.settings",
        }
        started = DaphneServer("ops-signin", env=env, proxy_headers=True).start()
    yield started
    started.stop()


@pytest.fixture
def address() -> str:
    """An address of this test's own (TEST-NET-2, never routed)."""
    return new_address()


def new_address() -> str:
    return f"198.51.{secrets.randbelow(256)}.{secrets.randbelow(254) + 1}"


def from_address(server: DaphneServer, address: str) -> Console:
    return Console(server.url, headers={"X-Forwarded-For": address})


def attempt(console: Console, username: str, password: str) -> httpx.Response:
    """Post the sign-in form as a browser would (fresh CSRF token from the form)."""
    page = console.get("/signin")
    assert page.status_code == 200, page.text
    form = form_with(page.text, "username")
    data = [(name, value) for name, value in form.hidden if name != "csrfmiddlewaretoken"]
    data += [
        ("csrfmiddlewaretoken", csrf_token_of(page.text)),
        ("username", username),
        ("password", password),
    ]
    return console.post("/signin", data)


def fail(server: DaphneServer, username: str, times: int, address: str) -> list[httpx.Response]:
    with from_address(server, address) as console:
        return [attempt(console, username, f"wrong-{secrets.token_hex(6)}") for _ in range(times)]


def signs_in(server: DaphneServer, person: TestPerson, address: str) -> bool:
    with from_address(server, address) as console:
        answer = attempt(console, person.username, person.password)
        if answer.status_code != 302:
            return False
        return console.get("/").status_code == 200


def set_cookie_of(response: httpx.Response, name: str) -> str:
    [header] = [
        value for value in response.headers.get_list("set-cookie") if value.startswith(f"{name}=")
    ]
    return header


def test_five_failures_lock_the_user_name_out_even_with_the_right_password(
    server: DaphneServer, world: dict[str, Any], address: str
) -> None:
    person = make_person(world, "operator")
    answers = fail(server, person.username, FAILURE_LIMIT - 1, address)
    assert [answer.status_code for answer in answers] == [200] * (FAILURE_LIMIT - 1)
    assert all(LOCKED_OUT not in answer.text for answer in answers)  # the form, with an error
    [last] = fail(server, person.username, 1, address)
    assert LOCKED_OUT in text_of(last.text)
    assert last.status_code == 429
    assert "for this user name from this address" in text_of(last.text)

    with from_address(server, address) as console:
        locked = attempt(console, person.username, person.password)
        assert locked.status_code == 429
        assert LOCKED_OUT in text_of(locked.text)
        assert "sessionid" not in console.http.cookies
        queue = console.get("/")
        assert queue.status_code == 302 and queue.headers["location"].startswith("/signin")


def test_the_paused_page_is_a_page_in_the_readers_language_with_a_way_back(
    server: DaphneServer, world: dict[str, Any], address: str
) -> None:
    person = make_person(world, "operator")
    fail(server, person.username, FAILURE_LIMIT, address)
    for language, heading, back in [
        ("en", LOCKED_OUT, "Back to signing in"),
        ("zh-Hans", "登录已暂停", "返回登录"),
    ]:
        headers = {"X-Forwarded-For": address, "Accept-Language": language}
        with Console(server.url, headers=headers) as console:
            locked = attempt(console, person.username, person.password)
        assert locked.status_code == 429
        assert heading in text_of(locked.text)
        assert f'<a href="/signin" id="lockout-back">{back}</a>' in locked.text
        assert '<header class="topbar">' in locked.text


def test_a_locked_out_user_name_leaves_other_user_names_alone(
    server: DaphneServer, world: dict[str, Any], address: str
) -> None:
    locked, other = make_person(world, "operator"), make_person(world, "operator")
    fail(server, locked.username, FAILURE_LIMIT, address)
    assert not signs_in(server, locked, address)
    assert signs_in(server, other, address)
    # A failure for the other name from the same address does not count against it twice.
    fail(server, other.username, 1, address)
    assert signs_in(server, other, address)


def test_failures_below_the_limit_are_forgotten_after_a_sign_in(
    server: DaphneServer, world: dict[str, Any], address: str
) -> None:
    person = make_person(world, "operator")
    fail(server, person.username, FAILURE_LIMIT - 1, address)
    assert signs_in(server, person, address)
    fail(server, person.username, FAILURE_LIMIT - 1, address)
    assert signs_in(server, person, address)


def test_the_lockout_ends_after_the_cool_off(
    server: DaphneServer, world: dict[str, Any], address: str
) -> None:
    person = make_person(world, "operator")
    fail(server, person.username, FAILURE_LIMIT, address)
    assert not signs_in(server, person, address)
    # Fifteen minutes pass for the recorded failures (AXES_COOLOFF_TIME's default).
    AccessAttempt.objects.filter(username=person.username).update(
        attempt_time=timezone.now() - timedelta(minutes=16)
    )
    assert signs_in(server, person, address)


def test_one_address_failing_for_many_user_names_is_paused_password_spraying(
    server: DaphneServer, world: dict[str, Any], address: str
) -> None:
    """Issue 13: one password tried against many people from one address. Each name fails
    once, far below its own limit; the address's allowance runs out, for every name."""
    people = [make_person(world, "operator") for _ in range(2)]
    for _ in range(ADDRESS_LIMIT - 1):
        fail(server, f"nobody-{secrets.token_hex(4)}", 1, address)
    # A sign-in of a real account does not wipe the address's record.
    assert signs_in(server, people[0], address)
    [last] = fail(server, f"nobody-{secrets.token_hex(4)}", 1, address)
    assert last.status_code == 429
    assert "from this address, for several user names" in text_of(last.text)
    assert not signs_in(server, people[1], address)
    assert signs_in(server, people[1], new_address())  # other addresses are not paused


def test_one_user_name_failing_from_many_addresses_is_paused_distributed_guessing(
    server: DaphneServer, world: dict[str, Any]
) -> None:
    """Issue 13: guesses at one person's password spread over addresses, each far below the
    pair's limit; the user name's own allowance runs out, from every address."""
    person, other = make_person(world, "operator"), make_person(world, "operator")
    for _ in range(USERNAME_LIMIT - 1):
        fail(server, person.username, 1, new_address())
    assert signs_in(server, person, new_address())  # a sign-in does not wipe the name's record
    [last] = fail(server, person.username, 1, new_address())
    assert last.status_code == 429
    assert "for this user name, from several addresses" in text_of(last.text)
    assert not signs_in(server, person, new_address())
    assert signs_in(server, other, new_address())  # other names are not paused


def test_only_real_failures_count(server: DaphneServer, world: dict[str, Any]) -> None:
    """Sign-ins that succeed, and forms refused before any password is checked (no CSRF token),
    count against nobody."""
    person = make_person(world, "operator")
    address = new_address()
    for _ in range(ADDRESS_LIMIT + 1):
        assert signs_in(server, person, address)
    with from_address(server, address) as console:
        for _ in range(ADDRESS_LIMIT + 1):
            refused = console.post(
                "/signin", [("username", person.username), ("password", "wrong")]
            )
            assert refused.status_code == 403  # CSRF
    assert signs_in(server, person, address)


def test_signing_in_rotates_a_session_key_known_before_sign_in(
    server: DaphneServer, world: dict[str, Any]
) -> None:
    """Session fixation: a key planted before sign-in must not become the signed-in session."""
    person = make_person(world, "operator")
    planted = SessionStore()
    planted["planted"] = True
    planted.create()
    before = planted.session_key
    assert before is not None
    with Console(server.url) as console:
        console.http.cookies.set("sessionid", before, domain="127.0.0.1")
        answer = attempt(console, person.username, person.password)
        assert answer.status_code == 302
        after = SimpleCookie(set_cookie_of(answer, "sessionid"))["sessionid"].value
        assert after != before
        assert not Session.objects.filter(session_key=before).exists()
        assert Session.objects.get(session_key=after).get_decoded()["_auth_user_id"] == str(
            person.user.pk
        )
    with Console(server.url) as intruder:
        intruder.http.cookies.set("sessionid", before, domain="127.0.0.1")
        assert intruder.get("/").status_code == 302  # the planted key opens nothing


def test_each_sign_in_gets_a_new_session_key(server: DaphneServer, world: dict[str, Any]) -> None:
    person = make_person(world, "operator")
    keys = []
    for _ in range(2):
        with Console(server.url) as console:
            assert attempt(console, person.username, person.password).status_code == 302
            keys.append(console.http.cookies["sessionid"])
    assert keys[0] != keys[1]


def test_session_cookie_is_http_only_and_ends_with_the_browser(
    server: DaphneServer, world: dict[str, Any]
) -> None:
    """SESSION_EXPIRE_AT_BROWSER_CLOSE: no Max-Age or Expires on the cookie; the server keeps
    the session SESSION_COOKIE_AGE seconds at most."""
    person = make_person(world, "operator")
    with Console(server.url) as anonymous:
        csrf = SimpleCookie(set_cookie_of(anonymous.get("/signin"), "csrftoken"))["csrftoken"]
        assert csrf["httponly"] is True
    with Console(server.url) as console:
        signed_in_at = timezone.now()
        answer = attempt(console, person.username, person.password)
        assert answer.status_code == 302
        header = set_cookie_of(answer, "sessionid")
        morsel = SimpleCookie(header)["sessionid"]
        assert morsel["httponly"] is True
        assert morsel["samesite"] == "Lax"
        assert morsel["path"] == "/"
        assert "max-age" not in header.lower() and "expires" not in header.lower()
        session = Session.objects.get(session_key=morsel.value)
        age = (session.expire_date - signed_in_at).total_seconds()
        assert SESSION_AGE_SECONDS - 120 < age <= SESSION_AGE_SECONDS + 120

        assert console.get("/").status_code == 200
        # The session's age runs out on the server: the same cookie no longer signs anyone in.
        Session.objects.filter(session_key=morsel.value).update(
            expire_date=timezone.now() - timedelta(seconds=1)
        )
        expired = console.get("/")
        assert expired.status_code == 302
        assert expired.headers["location"].startswith("/signin")


def test_passwords_are_hashed_with_argon2_and_older_hashes_upgraded_on_sign_in(
    server: DaphneServer, world: dict[str, Any], address: str
) -> None:
    """Issue 15: PBKDF2 (1 500 000 iterations) made a sign-in take 2.5 to 3.2 s on a busy machine.
    New passwords are hashed with Argon2id; a person whose hash is older signs in as before, and
    their hash becomes Argon2 on the way."""
    from django.contrib.auth.hashers import make_password

    fresh = make_person(world, "operator")
    assert fresh.user.password.startswith("argon2$argon2id$")

    older = make_person(world, "operator")
    older.user.password = make_password(older.password, hasher="pbkdf2_sha256")
    older.user.save(update_fields=["password"])
    assert signs_in(server, older, address)
    older.user.refresh_from_db()
    assert older.user.password.startswith("argon2$argon2id$")
    assert older.user.check_password(older.password)
