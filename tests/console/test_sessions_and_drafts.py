"""Sessions and drafts (issue 30), over real HTTP and real WebSockets on a real server: a form
with typed text that arrives after its session has ended is kept — for the same person, in the
same browser, for a short while, encrypted and without its CSRF token — and given back on its
page after signing in again; a form refused for an out-of-date CSRF token keeps it too, but only
when the browser says it came from this site; the session's idle end moves with the person's
requests (not the page's own) and with "stay signed in", never past the end of the sign-in; and
the console's sockets close with 4401 once their session has ended.

Sessions are ended the way time or another tab ends them: their row is deleted or aged in the
database."""

import asyncio
import re
from collections.abc import Iterator
from datetime import timedelta
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from django.contrib.sessions.models import Session
from django.utils import timezone
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed
from websockets.typing import Origin

from orbit_console.decisions.models import Batch, ProposalState
from orbit_console.ops.sessions import SessionStore
from orbit_console.people.models import Draft
from tests.approvals.conftest import pending_retry
from tests.console.test_batch_pages import new_batch
from tests.console.web import (
    EVIDENCE,
    REASON,
    REVIEW_CHECKS,
    Console,
    form_with,
    signed_in,
    step_of,
    text_of,
    wizard_post,
)
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer
from tests.timeline.helpers import session_cookie

IDLE_SECONDS = 120
RESULT = '{"confirmed": true, "sequence": 9007199254740993}'
KEPT = "nothing you typed is lost"


@pytest.fixture(scope="module")
def server(django_db_setup: None, django_db_blocker: Any) -> Iterator[DaphneServer]:
    """Sessions end after two idle minutes; sockets look at theirs every second."""
    with django_db_blocker.unblock():
        env = {"SESSION_IDLE_TIMEOUT": str(IDLE_SECONDS), "SESSION_RECHECK_SECONDS": "1"}
        started = DaphneServer("sessions", env=env).start()
    yield started
    started.stop()


def end_session(console: Console) -> None:
    """The session ends on the server (expired, idle, or signed out elsewhere)."""
    key = console.http.cookies["sessionid"]
    assert Session.objects.filter(session_key=key).delete()[0] == 1


def row_of(console: Console) -> Session:
    return Session.objects.get(session_key=console.http.cookies["sessionid"])


def decide_page(console: Console, task_id: str) -> tuple[str, httpx.Response]:
    """The review wizard of ``task_id`` up to its Decide step."""
    path = f"/tasks/{task_id}/review"
    page = wizard_post(console, path, console.get(path).text, REVIEW_CHECKS)
    assert page.status_code == 200 and step_of(page.text) == "decide", text_of(page.text)
    return path, page


TYPED = [
    ("outcome", "FAILED"),
    ("result", RESULT),
    ("reason", REASON),
    ("evidence_ref", EVIDENCE),
]


def post_step(
    console: Console, path: str, html: str, values: list[tuple[str, str]], **kwargs: Any
) -> httpx.Response:
    """The wizard's form as a browser sends it (its hidden fields, what was typed, Next), with
    the request's own headers (``headers=``)."""
    form = form_with(html, "pin")
    return console.post(path, [*form.hidden, *values, ("nav", "next")], **kwargs)


def field_value(html: str, name: str) -> str | None:
    return form_with(html, "pin").value(name)


def sign_in_location(response: httpx.Response) -> tuple[str, str]:
    assert response.status_code == 302, f"{response.status_code}: {text_of(response.text)}"
    location = urlsplit(response.headers["location"])
    return location.path, parse_qs(location.query)["next"][0]


# --- A wizard step that arrives without a session ---------------------------------------------


def test_a_wizard_step_sent_after_the_session_ended_is_given_back_after_signing_in(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Next on Decide after the session ended: the sign-in page says why and that nothing is
    lost; signed in again, the person is back on Decide with everything they typed and the
    revision they pinned. Nothing was decided meanwhile."""
    task_id = world["tasks"]["needs_review"]
    with signed_in(server.url, people["operator"]) as console:
        path, page = decide_page(console, task_id)
        pin = field_value(page.text, "pin")
        end_session(console)
        answer = wizard_post(console, path, page.text, TYPED)
        assert sign_in_location(answer) == ("/signin", path)
        assert "orbit_draft" in console.http.cookies

        draft = Draft.objects.get(owner=people["operator"].user)
        assert draft.resume_at == path and draft.posted_to == path
        assert draft.expires_at <= timezone.now() + timedelta(minutes=31)
        # Encrypted at rest, and never the form's CSRF token.
        assert REASON not in draft.fields_sealed and EVIDENCE not in draft.fields_sealed
        signin = console.get(answer.headers["location"])
        assert KEPT in text_of(signin.text)

        console.sign_in(people["operator"])
        resumed = console.get(path)
        assert resumed.status_code == 200
        assert step_of(resumed.text) == "decide"
        assert field_value(resumed.text, "reason") == REASON
        assert field_value(resumed.text, "evidence_ref") == EVIDENCE
        assert field_value(resumed.text, "result") == RESULT
        assert field_value(resumed.text, "outcome") == "FAILED"
        assert field_value(resumed.text, "pin") is not None
        assert field_value(resumed.text, "pin") != ""
        assert "signed out before this step was sent" in text_of(resumed.text)
        assert pin is not None
        # The same pin (revision 3), the checks of Verify carried along.
        form = form_with(resumed.text, "pin")
        assert ("checked_history", "on") in form.hidden
        assert "Pinned revision 3" in text_of(resumed.text)
        assert not Draft.objects.filter(owner=people["operator"].user).exists()  # given back once
        # The step goes on from there.
        confirm = console.post(path, [*form.fields, ("nav", "next")])  # as the page stands
        assert step_of(confirm.text) == "confirm"
        assert REASON in text_of(confirm.text)
        again = console.get(path)
        assert step_of(again.text) == "verify"  # given back once only


def test_the_confirm_step_comes_back_as_it_was_and_nothing_is_sent(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson], api: httpx.Client
) -> None:
    """Submit pressed after the session ended: the decision is not sent for the person; they
    are back on Confirm with the body, and the task still waits."""
    from tests.console.web import review_values, wizard_to_confirm
    from tests.support.orbit import get_task

    task_id = world["tasks"]["needs_review"]
    supervisor = make_person(world, "supervisor")  # sends without approval
    with signed_in(server.url, supervisor) as console:
        confirm = wizard_to_confirm(console, task_id, "review", review_values())
        end_session(console)
        path = f"/tasks/{task_id}/review"
        answer = wizard_post(
            console, path, confirm.text, [("execution_settled", "on")], nav="submit"
        )
        assert sign_in_location(answer)[1] == path
        console.sign_in(supervisor)
        resumed = console.get(path)
        assert step_of(resumed.text) == "confirm"
        assert REASON in text_of(resumed.text)
    task = get_task(api, task_id, world["tokens"]["admin"]).json()["data"]
    assert (task["state"], task["revision"]) == ("NEEDS_REVIEW", "3")


def test_stay_shows_the_same_step_again_and_never_submits(
    server: DaphneServer, world: dict[str, Any], api: httpx.Client
) -> None:
    """The note's "sign in to continue" sends the step with nav=stay; should the session still
    be valid (signed in again meanwhile), that shows the step as it stands and does nothing:
    on Confirm, with the confirmation ticked, nothing is sent."""
    from tests.console.web import review_values, wizard_to_confirm
    from tests.support.orbit import get_task

    task_id = world["tasks"]["needs_review"]
    supervisor = make_person(world, "supervisor")  # sends without approval
    with signed_in(server.url, supervisor) as console:
        confirm = wizard_to_confirm(console, task_id, "review", review_values())
        path = f"/tasks/{task_id}/review"
        stayed = wizard_post(console, path, confirm.text, [("execution_settled", "on")], nav="stay")
        assert stayed.status_code == 200
        assert step_of(stayed.text) == "confirm"
        assert REASON in text_of(stayed.text)
    task = get_task(api, task_id, world["tokens"]["admin"]).json()["data"]
    assert (task["state"], task["revision"]) == ("NEEDS_REVIEW", "3")


def test_a_draft_is_given_back_only_to_the_person_whose_session_it_was(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Another person signing in in the same browser finds a fresh wizard; the draft is gone."""
    task_id = world["tasks"]["needs_review"]
    other = make_person(world, "operator")
    with signed_in(server.url, people["operator"]) as console:
        path, page = decide_page(console, task_id)
        end_session(console)
        wizard_post(console, path, page.text, TYPED)
        assert Draft.objects.filter(owner=people["operator"].user).count() == 1
        console.sign_in(other)
        fresh = console.get(path)
        assert step_of(fresh.text) == "verify"
        assert REASON not in fresh.text
    assert not Draft.objects.filter(owner=people["operator"].user).exists()


def test_a_draft_stays_in_its_browser_and_expires(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    task_id = world["tasks"]["needs_review"]
    operator = people["operator"]
    with signed_in(server.url, operator) as console:
        path, page = decide_page(console, task_id)
        end_session(console)
        wizard_post(console, path, page.text, TYPED)
        with signed_in(server.url, operator) as elsewhere:
            assert step_of(elsewhere.get(path).text) == "verify"
        assert Draft.objects.filter(owner=operator.user).count() == 1
        Draft.objects.filter(owner=operator.user).update(
            expires_at=timezone.now() - timedelta(seconds=1)
        )
        console.sign_in(operator)
        assert step_of(console.get(path).text) == "verify"


def test_without_knowing_whose_browser_it_is_nothing_is_kept_and_the_page_says_so(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """A browser that never signed in (no owner cookie) keeps no draft: the promise is not made."""
    task_id = world["tasks"]["needs_review"]
    with signed_in(server.url, people["operator"]) as console:
        path, page = decide_page(console, task_id)
        end_session(console)
        console.http.cookies.delete("orbit_person")
        answer = wizard_post(console, path, page.text, TYPED)
        signin = console.get(answer.headers["location"])
    assert not Draft.objects.filter(owner=people["operator"].user).exists()
    assert KEPT not in text_of(signin.text)
    assert "could not be kept" in text_of(signin.text)


def test_signing_out_forgets_the_browsers_drafts(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    task_id = world["tasks"]["needs_review"]
    operator = people["operator"]
    with signed_in(server.url, operator) as console:
        path, page = decide_page(console, task_id)
        end_session(console)
        wizard_post(console, path, page.text, TYPED)
        console.sign_in(operator)
        signout = console.post("/signout", [("csrfmiddlewaretoken", console.csrf_token())])
        assert signout.status_code == 302
        assert "orbit_person" not in console.http.cookies
    assert not Draft.objects.filter(owner=operator.user).exists()


# --- Refused for its CSRF token ----------------------------------------------------------------


def test_a_form_refused_for_an_old_csrf_token_keeps_the_draft_when_it_came_from_this_site(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """Signed in again in another tab (a new CSRF token), Next in the old tab is refused —
    nothing is done — and, the browser saying it came from this site, the step is kept and the
    refusal offers to continue. Without that word (no Origin), or from another site, nothing is
    kept: the refusal is exactly what it was."""
    task_id = world["tasks"]["needs_review"]
    operator = people["operator"]
    with signed_in(server.url, operator) as console:
        path, page = decide_page(console, task_id)
        end_session(console)
        console.sign_in(operator)  # "another tab": a new session and a new CSRF token

        for origin in (None, "http://evil.example"):
            headers = {"Origin": origin} if origin else {}
            refused = post_step(console, path, page.text, TYPED, headers=headers)
            assert refused.status_code == 403
            assert "Continue where you left off" not in refused.text
            assert not Draft.objects.filter(owner=operator.user).exists()

        refused = post_step(console, path, page.text, TYPED, headers={"Origin": server.url})
        assert refused.status_code == 403
        assert "nothing was done" in text_of(refused.text)
        assert re.search(rf'<a href="{path}" id="draft-resume">', refused.text)
        resumed = console.get(path)
        assert step_of(resumed.text) == "decide"
        assert field_value(resumed.text, "reason") == REASON


def test_a_refused_form_keeps_the_draft_for_a_person_signed_out_too(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """No session and no valid token (the browser lost its CSRF cookie): the refusal keeps the
    step for the browser's person, and the way on leads through signing in."""
    task_id = world["tasks"]["needs_review"]
    operator = people["operator"]
    with signed_in(server.url, operator) as console:
        path, page = decide_page(console, task_id)
        end_session(console)
        console.http.cookies.delete("csrftoken")
        refused = post_step(console, path, page.text, TYPED, headers={"Origin": server.url})
        assert refused.status_code == 403
        assert 'id="draft-resume"' in refused.text
        assert sign_in_location(console.get(path))[1] == path
        assert KEPT in text_of(console.get(f"/signin?next={path}").text)
        console.sign_in(operator)
        assert field_value(console.get(path).text, "reason") == REASON


# --- Supervisors' notes and a batch's decision -------------------------------------------------


def test_a_rejection_reason_sent_after_the_session_ended_comes_back_and_nothing_is_rejected(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    proposal = pending_retry(world, people["operator"])
    page_path = f"/proposals/{proposal.id}"
    reason = "The evidence reference points at last week's incident"
    note = "Approved after a call with the owner of the queue"
    supervisor = people["supervisor"]
    with signed_in(server.url, supervisor) as console:
        page = console.get(page_path).text
        token = form_with(page, "reason").value("csrfmiddlewaretoken") or ""
        end_session(console)
        answer = console.post(
            f"{page_path}/reject", [("csrfmiddlewaretoken", token), ("reason", reason)]
        )
        assert sign_in_location(answer)[1] == page_path
        console.sign_in(supervisor)
        back = console.get(page_path)
        assert form_with(back.text, "reason").value("reason") == reason
        end_session(console)
        token = form_with(back.text, "note").value("csrfmiddlewaretoken") or ""
        answer = console.post(
            f"{page_path}/approve", [("csrfmiddlewaretoken", token), ("note", note)]
        )
        assert sign_in_location(answer)[1] == page_path
        console.sign_in(supervisor)
        assert form_with(console.get(page_path).text, "note").value("note") == note
    proposal.refresh_from_db()
    assert proposal.state == ProposalState.PENDING


def test_a_batch_decision_sent_after_the_session_ended_comes_back_in_its_form(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    operator = people["operator"]
    reason = "broker outage INC-30: nothing was written"
    with signed_in(server.url, operator) as console:
        _, batch = new_batch(console, action="review", task=[world["tasks"]["needs_review"]])
        assert batch is not None
        page = console.get(f"/batches/{batch.id}").text
        token = form_with(page, "reason").value("csrfmiddlewaretoken") or ""
        end_session(console)
        answer = console.post(
            f"/batches/{batch.id}/decide",
            [
                ("csrfmiddlewaretoken", token),
                ("outcome", "FAILED"),
                ("result", '{"lost": true}'),
                ("reason", reason),
                ("evidence_ref", "https://status.example/INC-30"),
            ],
        )
        assert sign_in_location(answer)[1] == f"/batches/{batch.id}"
        console.sign_in(operator)
        back = console.get(f"/batches/{batch.id}").text
        assert form_with(back, "reason").value("reason") == reason
        assert form_with(back, "reason").value("evidence_ref") == "https://status.example/INC-30"
    assert Batch.objects.get(id=batch.id).decision == ""


# --- Pages and requests without a session ------------------------------------------------------


def test_a_page_after_the_session_ended_says_why_and_a_live_part_is_told_401(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """A page asks to sign in to itself and says the session ended; the live part of a page
    (htmx) is answered 401, not the sign-in page to show inside itself."""
    task_id = world["tasks"]["needs_review"]
    with signed_in(server.url, people["operator"]) as console:
        assert console.get(f"/tasks/{task_id}").status_code == 200
        end_session(console)
        live = console.get(f"/tasks/{task_id}/recovery", headers={"HX-Request": "true"})
        assert live.status_code == 401
        page = console.get(f"/tasks/{task_id}")
        assert sign_in_location(page)[1] == f"/tasks/{task_id}"
        assert "Your session ended" in text_of(console.get(page.headers["location"]).text)


# --- When a session ends -----------------------------------------------------------------------


def test_the_idle_end_moves_with_the_persons_requests_and_stay_signed_in(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """A page of the person's moves the idle end to now + SESSION_IDLE_TIMEOUT; a look at
    /session and a request the page makes on its own (Orbit-Background) do not; "stay signed in"
    does, through a CSRF-protected POST."""
    task_id = world["tasks"]["needs_review"]
    with signed_in(server.url, people["operator"]) as console:
        token = console.csrf_token()  # a page of the person's: the idle end moves
        left = (row_of(console).expire_date - timezone.now()).total_seconds()
        assert IDLE_SECONDS - 30 < left <= IDLE_SECONDS

        soon = timezone.now() + timedelta(seconds=50)
        Session.objects.filter(session_key=console.http.cookies["sessionid"]).update(
            expire_date=soon
        )
        status = console.get("/session").json()
        assert status["signed_in"] is True and status["extendable"] is True
        assert abs(status["expires_at"] - soon.timestamp() * 1000) < 1000
        assert 0 < status["warn_seconds"] <= 60
        background = console.get(f"/tasks/{task_id}/recovery", headers={"Orbit-Background": "1"})
        assert background.status_code == 200
        assert row_of(console).expire_date == soon

        assert console.post("/session/extend", []).status_code == 403  # no CSRF token
        assert row_of(console).expire_date == soon
        extended = console.post("/session/extend", [], headers={"X-CSRFToken": token})
        assert extended.status_code == 200, extended.text
        moved = row_of(console).expire_date
        assert moved > soon + timedelta(seconds=30)
        assert abs(extended.json()["expires_at"] - moved.timestamp() * 1000) < 1000

        assert console.get("/").status_code == 200
        assert row_of(console).expire_date - moved < timedelta(seconds=13)  # written coarsely

        end_session(console)
        assert console.get("/session").json() == {"signed_in": False}
        refused = console.post("/session/extend", [], headers={"X-CSRFToken": token})
        assert refused.status_code == 401


def test_nothing_extends_a_session_past_the_end_of_its_sign_in(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    with signed_in(server.url, people["operator"]) as console:
        assert console.get("/").status_code == 200
        store = SessionStore(console.http.cookies["sessionid"])
        ends = timezone.now() + timedelta(seconds=40)
        store["orbit.session.ends"] = int(ends.timestamp())
        store["orbit.session.expires"] = int(ends.timestamp())
        store.save()
        assert console.get("/").status_code == 200
        status = console.get("/session").json()
        assert status["extendable"] is False
        assert abs(status["expires_at"] - status["ends_at"]) < 1000
        extended = console.post(
            "/session/extend", [], headers={"X-CSRFToken": console.csrf_token()}
        )
        assert extended.json()["expires_at"] <= int(ends.timestamp()) * 1000
        assert row_of(console).expire_date <= ends


# --- Sockets -----------------------------------------------------------------------------------


def test_a_socket_closes_with_4401_when_its_session_ends_and_without_one(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    """The page learns "signed out" from the close code: an open socket is closed with 4401
    once its session's row is gone or its end has passed, and a socket without a session is
    accepted only to be closed with 4401 (a refused handshake reaches the page as 1006, which
    it would retry for ever)."""
    base = server.url.replace("http://", "ws://", 1)
    deleted = session_cookie(people["operator"].user)
    aged = session_cookie(people["operator"].user)

    async def closed_code(session: str | None, *, then: Any = None) -> int:
        headers = {"Cookie": f"sessionid={session}"} if session else {}
        async with connect(
            f"{base}/ws/decisions",
            origin=Origin(server.url),
            additional_headers=headers,
            proxy=None,
            open_timeout=30,
        ) as socket:
            if then is not None:
                await asyncio.to_thread(then)
            with pytest.raises(ConnectionClosed) as closed:
                async with asyncio.timeout(30):
                    await socket.recv()
        assert closed.value.rcvd is not None
        return closed.value.rcvd.code

    def delete() -> None:
        Session.objects.filter(session_key=deleted).delete()

    def age() -> None:
        Session.objects.filter(session_key=aged).update(
            expire_date=timezone.now() + timedelta(seconds=2)
        )

    async def scenario() -> None:
        assert await closed_code(None) == 4401
        assert await closed_code(deleted, then=delete) == 4401
        assert await closed_code(aged, then=age) == 4401

    asyncio.run(scenario())


def test_the_page_knows_when_its_session_ends(
    server: DaphneServer, world: dict[str, Any], people: dict[str, TestPerson]
) -> None:
    with signed_in(server.url, people["operator"]) as console:
        page = console.get("/").text
        row = row_of(console)
    note = re.search(r'<div id="session-note"[^>]*>', page, re.DOTALL)
    assert note is not None
    expires = re.search(r'data-expires-at="(\d+)"', note.group(0))
    assert expires is not None
    assert abs(int(expires.group(1)) - row.expire_date.timestamp() * 1000) < 1000
    assert 'data-extendable="yes"' in note.group(0)
    assert "Stay signed in" in page
