"""Typing one's password again before deciding has the person's own throttle
(signin/confirmations.py; issue 39, item 5): wrong confirmations lock that person's
confirmations and say so, and never lock out anyone else behind the same address."""

import secrets
from typing import Any

from django.test import Client

from orbit_console.signin.stepup import AUTH
from tests.support.people import TestPerson, make_person


def behind(address: str, person: TestPerson | None = None) -> Client:
    client = Client(REMOTE_ADDR=address)
    if person is not None:
        client.force_login(person.user)
    return client


def confirm(client: Client, password: str) -> Any:
    return client.post("/signin/confirm", {"password": password, "next": "/approvals"})


def test_wrong_confirmations_lock_that_person_alone_and_say_so(world: dict[str, Any]) -> None:
    """Ten wrong passwords at /signin/confirm from one address locked the address: every
    person behind the same proxy or NAT was refused at sign-in."""
    address = f"203.0.113.{secrets.randbelow(250) + 1}"
    guesser, colleague = make_person(world, "supervisor"), make_person(world, "supervisor")
    session = behind(address, guesser)
    answers = [confirm(session, "not the password") for _ in range(10)]
    assert [a.status_code for a in answers[:4]] == [200] * 4
    assert all(a.status_code == 429 for a in answers[4:])  # AXES_FAILURE_LIMIT is 5
    locked = answers[-1].content.decode()
    assert 'id="step-up-locked"' in locked and "Nobody else is locked out" in locked
    assert 'id="step-up-form"' not in locked
    # Locked: even the right password confirms nothing until the time passes.
    assert confirm(session, guesser.password).status_code == 429
    assert AUTH not in session.session or session.session[AUTH]["method"] != "password"
    chinese = session.get("/signin/confirm", HTTP_ACCEPT_LANGUAGE="zh-hans").content.decode()
    assert "其他人不受影响" in chinese

    # Everyone else behind the address signs in and confirms as before.
    signed_in = behind(address).post(
        "/signin", {"username": colleague.username, "password": colleague.password}
    )
    assert signed_in.status_code == 302 and not signed_in["Location"].startswith("/signin")
    other = behind(address, colleague)
    assert confirm(other, colleague.password).status_code == 302
    # The guesser's own sign-in is not what was guessed at: a fresh one still works.
    assert (
        behind(address)
        .post("/signin", {"username": guesser.username, "password": guesser.password})
        .status_code
        == 302
    )


def test_a_right_confirmation_forgets_the_wrong_ones(world: dict[str, Any]) -> None:
    person = make_person(world, "supervisor")
    session = behind(f"203.0.113.{secrets.randbelow(250) + 1}", person)
    for _ in range(4):
        assert confirm(session, "wrong").status_code == 200
    assert confirm(session, person.password).status_code == 302
    assert session.session[AUTH]["method"] == "password"
    for _ in range(4):  # four more: the count began again
        assert confirm(session, "wrong").status_code == 200
