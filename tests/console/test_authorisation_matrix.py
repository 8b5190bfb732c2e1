"""The authorisation matrix (issue 13): every URL and WebSocket route of the console, for every
kind of person, over real HTTP against a real server.

The routes are collected from the URL resolvers and the WebSocket routing, so a new view that
is not in the matrix fails ``test_every_route_is_in_the_matrix`` until someone decides what it
answers to whom. The people, all with the three roles where a role matters:

- own namespace: an operator, a supervisor and an auditor of the namespace the things belong
  to — each gets the status the matrix names for its role; so does each of them when they hold
  a credential in another namespace as well ("everywhere": the console must pick the one that
  reads the task);
- outsiders: the same roles in another namespace, people of the same namespace whose credential
  covers another queue only, and people with roles but no credential. On a route about one
  task they get 403 or 404 and change nothing; on a list they see nothing of the namespace.
- signed out: sent to the sign-in page (GET) or refused (POST).

Every outsider's answer is searched for the namespace's secrets (a reason written into its
proposal, its people's names, the ids of its submissions and proposals); none may appear.
"""

import itertools
import json
import secrets
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import User
from django.urls import URLPattern, URLResolver, get_resolver
from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect
from websockets.typing import Origin

from orbit_console.decisions.models import Batch, ConsoleEvent, Proposal, Submission
from orbit_console.decisions.proposals import proposal_create
from orbit_console.decisions.submissions import submission_create
from orbit_console.ledger.models import OperationAudit, Queue
from orbit_console.lib.live import CLOSE_UNAUTHENTICATED
from orbit_console.people.credentials import credential_drop, mint_embedded
from orbit_console.people.models import OrbitCredential
from orbit_console.routing import websocket_urlpatterns
from tests.console.web import Console, signed_in
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer
from tests.timeline.helpers import session_cookie

ROLES = ("operator", "supervisor", "auditor")
OUTSIDERS = ("other-namespace", "other-queue", "no-credential")
NOT_FOUND_OR_FORBIDDEN = frozenset({403, 404})

# Routes that are not the console's to scope: the recovery API (bearer tokens; C3 and C4 are
# tested in tests/ledger) and what every visitor may reach.
# The recovery API's routes (its own rules: tests/ledger, tests/events).
API_NAMESPACES = ("api:", "events:")
PUBLIC = {"login", "logout", "set_language", "health-live", "health-ready", "metrics"}
# What a page knows of its own session (tests/console/test_sessions_and_drafts.py): anyone may
# ask; the signed out are told only that they are signed out.
PUBLIC |= {"session", "session_extend"}
# Company sign-in (tests/browser/test_oidc.py): the way in and back from the provider.
PUBLIC |= {"signin:oidc_start", "signin:oidc_callback", "signin:oidc_backchannel_logout"}
# Any signed-in person ends their own sessions (the signed out are sent to sign in).
PUBLIC |= {"signin:sign_out_everywhere"}
# Step-up before deciding (tests/browser/test_step_up.py): any signed-in person confirms.
PUBLIC |= {"signin:confirm"}


@dataclass(frozen=True)
class Route:
    """One console route: its path (``{task}``, ``{failed}``, ``{operation}``, ``{proposal}``,
    ``{submission}`` filled from the namespace's things), and per method the status each role
    of the namespace gets. ``scoped``: about one task (outsiders get 403/404); otherwise a list,
    filtered to what the person may see."""

    path: str
    expect: dict[str, dict[str, int]]
    scoped: bool = True
    form: tuple[tuple[str, str], ...] = ()


def every(status: int) -> dict[str, int]:
    return dict.fromkeys(ROLES, status)


ROUTES: dict[str, Route] = {
    "console:work_queue": Route("/", {"GET": every(200)}, scoped=False),
    "console:task": Route("/tasks/{task}", {"GET": every(200)}),
    "console:task_recovery": Route("/tasks/{task}/recovery", {"GET": every(200)}),
    # Where signing in lands: a redirect for everyone (per role, issue 30).
    "console:start": Route("/start", {"GET": every(302)}, scoped=False),
    # The navigation's count of what waits for a supervisor (empty for the others).
    "console:approvals_waiting": Route("/approvals/waiting", {"GET": every(200)}, scoped=False),
    "console:review": Route(
        "/tasks/{task}/review",
        {
            "GET": {"operator": 200, "supervisor": 200, "auditor": 403},
            # No pin: the wizard starts again (a redirect), it decides nothing.
            "POST": {"operator": 302, "supervisor": 302, "auditor": 403},
        },
    ),
    "console:retry": Route(
        "/tasks/{failed}/retry",
        {
            "GET": {"operator": 200, "supervisor": 200, "auditor": 403},
            "POST": {"operator": 302, "supervisor": 302, "auditor": 403},
        },
    ),
    "console:submission": Route("/submissions/{submission}", {"GET": every(200)}),
    # One's own decisions: anyone's list of what they decided (an auditor's is empty).
    "console:decisions": Route("/decisions", {"GET": every(200)}, scoped=False),
    "console:submission_resend": Route(
        "/submissions/{submission}/resend",
        # Only the person it is sent as resends it.
        {"POST": {"operator": 303, "supervisor": 403, "auditor": 403}},
    ),
    "console:audit": Route(
        "/audit", {"GET": {"operator": 403, "supervisor": 200, "auditor": 200}}, scoped=False
    ),
    "console:audit_export": Route(
        "/audit/export.jsonl",
        {"GET": {"operator": 403, "supervisor": 200, "auditor": 200}},
        scoped=False,
    ),
    "console:operation": Route(
        "/tasks/{task}/operations/{operation}",
        # The platform's audit detail needs tasks:audit:read, which every role implies.
        {"GET": every(200)},
    ),
    # Administrators only (Django's superusers; tests/console/test_commands.py): no role is one.
    "signin:person": Route("/people/nobody", {"GET": every(403)}, scoped=False),
    "signin:person_sign_out": Route("/people/nobody/signout", {"POST": every(403)}, scoped=False),
    "signin:person_link": Route("/people/nobody/link", {"POST": every(403)}, scoped=False),
    "signin:person_held": Route(
        "/people/nobody/held/0123456789abcdef0123456789abcdef", {"POST": every(403)}, scoped=False
    ),
    "console:approvals": Route(
        "/approvals", {"GET": {"operator": 403, "supervisor": 200, "auditor": 403}}, scoped=False
    ),
    "console:proposal": Route("/proposals/{proposal}", {"GET": every(200)}),
    "console:proposal_approve": Route(
        "/proposals/{proposal}/approve",
        {"POST": {"operator": 403, "supervisor": 303, "auditor": 403}},
    ),
    "console:proposal_reject": Route(
        "/proposals/{proposal}/reject",
        {"POST": {"operator": 403, "supervisor": 303, "auditor": 403}},
        form=(("reason", "Not convinced"),),
    ),
    "console:proposal_withdraw": Route(
        "/proposals/{proposal}/withdraw",
        # The proposer withdraws; a supervisor is told they cannot (on the proposal's page).
        {"POST": {"operator": 303, "supervisor": 303, "auditor": 403}},
    ),
    # Batches (docs/bulk.md): the operator's batch, at its verify step. Deciding and confirming
    # are its author's; approving a supervisor's; a step the batch's state does not allow is
    # refused with a message (a redirect) and changes nothing.
    "console:batches": Route("/batches", {"GET": every(200)}, scoped=False),
    "console:batch_new": Route(
        "/batches/new",
        {"POST": {"operator": 302, "supervisor": 302, "auditor": 403}},
        scoped=False,
        form=(("action", "review"), ("task", "{task}")),
    ),
    # Counting what "every task matching" would take: over the person's own credential.
    "console:batch_matching": Route(
        "/batches/matching?business_key_prefix=x",
        {"GET": {"operator": 200, "supervisor": 200, "auditor": 403}},
        scoped=False,
    ),
    "console:batch": Route("/batches/{batch}", {"GET": every(200)}),
    "console:batch_decide": Route(
        "/batches/{batch}/decide",
        # Nothing typed: the author sees the mistakes (400); anyone else may not decide.
        {"POST": {"operator": 400, "supervisor": 403, "auditor": 403}},
    ),
    "console:batch_confirm": Route(
        "/batches/{batch}/confirm", {"POST": {"operator": 302, "supervisor": 403, "auditor": 403}}
    ),
    "console:batch_approve": Route(
        "/batches/{batch}/approve", {"POST": {"operator": 403, "supervisor": 302, "auditor": 403}}
    ),
    "console:batch_reject": Route(
        "/batches/{batch}/reject",
        {"POST": {"operator": 403, "supervisor": 302, "auditor": 403}},
        form=(("reason", "Not convinced"),),
    ),
    "console:batch_pause": Route(
        "/batches/{batch}/pause", {"POST": {"operator": 302, "supervisor": 302, "auditor": 403}}
    ),
    "console:batch_resume": Route(
        "/batches/{batch}/resume", {"POST": {"operator": 302, "supervisor": 302, "auditor": 403}}
    ),
    "console:batch_cancel": Route(
        "/batches/{batch}/cancel", {"POST": {"operator": 302, "supervisor": 302, "auditor": 403}}
    ),
    "console:batch_export": Route("/batches/{batch}/outcomes.csv", {"GET": every(200)}),
    "console:batch_verify": Route(
        "/batches/{batch}/verify",
        # Nothing ticked: the author sees the boxes to tick (400); anyone else may not verify.
        {"POST": {"operator": 400, "supervisor": 403, "auditor": 403}},
    ),
    # Last of the batch's routes: its author discards it (then every step is refused alike).
    "console:batch_discard": Route(
        "/batches/{batch}/discard", {"POST": {"operator": 302, "supervisor": 403, "auditor": 403}}
    ),
    "timeline:older": Route("/tasks/{task}/timeline/older", {"GET": every(200)}),
    "timeline:latest": Route("/tasks/{task}/timeline/latest", {"GET": every(200)}),
    # One's own notifications and choices (issue 32); the webhooks' log is administrators'.
    "notifications:list": Route("/notifications", {"GET": every(200)}, scoped=False),
    "notifications:read": Route("/notifications/read", {"POST": every(302)}, scoped=False),
    "notifications:preferences": Route(
        "/notifications/preferences", {"POST": every(302)}, scoped=False
    ),
    "notifications:deliveries": Route(
        "/notifications/deliveries", {"GET": every(403)}, scoped=False
    ),
    "notifications:replay": Route(
        "/notifications/deliveries/msg_x/replay", {"POST": every(403)}, scoped=False
    ),
}

SOCKETS = {
    "ws/tasks/<str:task_id>/timeline": "/ws/tasks/{task}/timeline",
    "ws/approvals": "/ws/approvals",
    # Its rows come in a token signed for one person (tests/console/test_queue_socket.py).
    "ws/queue": "/ws/queue",
    "ws/batches/<str:batch_id>": "/ws/batches/{batch}",
    # One's own decisions' follow-ups: the person's own group only.
    "ws/decisions": "/ws/decisions",
    # One's own notifications' unread count: the person's own group only.
    "ws/notifications": "/ws/notifications",
}


# --- The routes --------------------------------------------------------------------------------


def url_names(resolvers: list[Any] | None = None, prefix: str = "") -> Iterator[str]:
    """Every route of the URL conf, as ``namespace:name`` (or its pattern when unnamed)."""
    for entry in resolvers if resolvers is not None else get_resolver().url_patterns:
        if isinstance(entry, URLResolver):
            namespace = f"{prefix}{entry.namespace}:" if entry.namespace else prefix
            yield from url_names(entry.url_patterns, namespace)
        elif isinstance(entry, URLPattern):
            yield f"{prefix}{entry.name}" if entry.name else f"{prefix}<{entry.pattern}>"


def test_every_route_is_in_the_matrix() -> None:
    """A route nobody placed in the matrix fails here: say what it answers to whom."""
    unplaced = {
        name
        for name in url_names()
        if name not in ROUTES and name not in PUBLIC and not name.startswith(API_NAMESPACES)
    }
    assert unplaced == set()
    assert {str(route.pattern) for route in websocket_urlpatterns} == set(SOCKETS)


# --- The namespace's things, and its people ---------------------------------------------------


@dataclass
class Things:
    world: dict[str, Any]
    operator: TestPerson
    secret: str
    made: list[str] = field(default_factory=list)  # ids of proposals and submissions
    revisions: Iterator[int] = field(default_factory=lambda: itertools.count(100))
    batch: str | None = None  # the operator's batch, selected once

    def fresh(self) -> dict[str, str]:
        """A pending proposal and an open, never-sent submission of the operator's, each in a
        decision slot of its own, plus the ids every path needs."""
        world, user = self.world, self.operator.user
        body = json.dumps({"reason": self.secret})
        proposal = proposal_create(
            action="review",
            task_id=world["tasks"]["needs_review_2"],
            queue_id=world["queue_id"],
            namespace_id=world["namespace_id"],
            expected_revision=str(next(self.revisions)),
            body=body,
            proposed_by=user,
        ).proposal
        submission = submission_create(
            action="review",
            task_id=world["tasks"]["needs_review"],
            queue_id=world["queue_id"],
            namespace_id=world["namespace_id"],
            expected_revision=str(next(self.revisions)),
            body=body,
            created_by=user,
        ).submission
        # Never due for the reconciler (whose passes take the oldest due first): these are
        # subjects of requests, not decisions anyone waits for.
        Submission.objects.filter(id=submission.id).update(next_attempt_at=None)
        self.made += [proposal.id, submission.id]
        task = world["tasks"]["needs_review"]
        if self.batch is None:
            from tests.decisions.test_batches import select

            self.batch = select(world, self.operator, [task]).id
        return {
            "task": task,
            "failed": world["tasks"]["failed"],
            "operation": OperationAudit.objects.filter(task_id=task).values_list("id", flat=True)[
                0
            ],
            "proposal": proposal.id,
            "submission": submission.id,
            "batch": self.batch,
        }

    def state(self) -> tuple[Any, ...]:
        """What an outsider must not change: the namespace's proposals, submissions and record."""
        namespace_id = self.world["namespace_id"]
        return (
            sorted(Proposal.objects.filter(id__in=self.made).values_list("id", "state")),
            sorted(Submission.objects.filter(id__in=self.made).values_list("id", "send_count")),
            list(Batch.objects.filter(id=self.batch).values_list("state", "decision")),
            # An export is recorded where its reader belongs, which may be this namespace.
            ConsoleEvent.objects.filter(namespace_id=namespace_id)
            .exclude(kind="audit.exported")
            .count(),
        )

    def secrets_in(self, html: str, path: str) -> list[str]:
        """Which of the namespace's secrets ``html`` shows (ids in ``path`` itself excepted)."""
        found = [self.secret, self.operator.username] + [i for i in self.made if i not in path]
        return [secret for secret in found if secret in html]


@pytest.fixture(scope="module")
def things(django_db_setup: None, django_db_blocker: Any) -> Iterator[Things]:
    from orbit_console.ledger.seed import seed_world

    with django_db_blocker.unblock():
        world = seed_world(label="matrix")
        secret = f"matrix-secret-{secrets.token_hex(6)}"
        yield Things(world, make_person(world, "operator"), secret)


def person(things: Things, kind: str, role: str) -> TestPerson:
    """A person of ``kind`` (own, everywhere, or one of OUTSIDERS) holding ``role``."""
    from orbit_console.ledger.seed import seed_world

    world = things.world
    if kind == "own":
        return things.operator if role == "operator" else make_person(world, role)
    if kind == "everywhere":
        # First a credential elsewhere, then the namespace's: whichever sorts first.
        someone = make_person(seed_world(label="matrix-elsewhere"), role)
        mint_embedded(user=someone.user, roles=someone.roles, namespace_id=world["namespace_id"])
        return someone
    if kind == "other-namespace":
        return make_person(seed_world(label="matrix-other"), role)
    if kind == "other-queue":
        other = Queue.objects.get(namespace_id=world["namespace_id"], name="reports")
        return make_person(world, role, queue_ids=frozenset({other.id}))
    assert kind == "no-credential"
    someone = make_person(world, role)
    OrbitCredential.objects.filter(user=someone.user).delete()
    return someone


def ask(
    console: Console, method: str, path: str, form: tuple[tuple[str, str], ...], ids: dict[str, str]
) -> Any:
    """``form``'s values name the things as the paths do (``{task}``)."""
    if method == "GET":
        return console.get(path)
    filled = [(name, value.format(**ids)) for name, value in form]
    return console.post(path, [("csrfmiddlewaretoken", console.csrf_token()), *filled])


# --- HTTP ---------------------------------------------------------------------------------------


@pytest.fixture
def operator_everywhere(things: Things) -> Iterator[None]:
    """The namespace's operator (whose proposals and submissions the things are) holds a
    credential in another namespace too, for the test."""
    from orbit_console.ledger.seed import seed_world

    elsewhere = seed_world(label="matrix-elsewhere")["namespace_id"]
    user = things.operator.user
    mint_embedded(user=user, roles=things.operator.roles, namespace_id=elsewhere)
    yield
    credential_drop(user=user, namespace_id=elsewhere)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("kind", ["own", "everywhere"])
def test_people_of_the_namespace_get_what_their_role_allows(
    orbit_server: DaphneServer,
    things: Things,
    role: str,
    kind: str,
    live_db: None,
    request: pytest.FixtureRequest,
) -> None:
    if kind == "everywhere" and role == "operator":
        request.getfixturevalue("operator_everywhere")
        subject = things.operator
    else:
        subject = person(things, kind, role)
    wrong: list[str] = []
    with signed_in(orbit_server.url, subject) as console:
        for name, route in ROUTES.items():
            for method, statuses in route.expect.items():
                ids = things.fresh()
                path = route.path.format(**ids)
                answer = ask(console, method, path, route.form, ids)
                if answer.status_code != statuses[role]:
                    wrong.append(f"{method} {name}: {answer.status_code}, not {statuses[role]}")
    assert wrong == []


@pytest.mark.parametrize(("kind", "role"), list(itertools.product(OUTSIDERS, ROLES)))
def test_outsiders_get_nothing_and_change_nothing(
    orbit_server: DaphneServer, things: Things, kind: str, role: str, live_db: None
) -> None:
    wrong: list[str] = []
    with signed_in(orbit_server.url, person(things, kind, role)) as console:
        for name, route in ROUTES.items():
            for method, statuses in route.expect.items():
                ids = things.fresh()
                path = route.path.format(**ids)
                before = things.state()
                answer = ask(console, method, path, route.form, ids)
                allowed = NOT_FOUND_OR_FORBIDDEN if route.scoped else {statuses[role], 403}
                if answer.status_code not in allowed:
                    wrong.append(f"{method} {name}: {answer.status_code}")
                if leaked := things.secrets_in(answer.text, path):
                    wrong.append(f"{method} {name} shows {leaked}")
                if things.state() != before:
                    wrong.append(f"{method} {name} changed something")
    assert wrong == []


def test_signed_out_visitors_are_sent_to_sign_in(
    orbit_server: DaphneServer, things: Things, live_db: None
) -> None:
    wrong: list[str] = []
    with httpx.Client(base_url=orbit_server.url, timeout=60) as visitor:
        for name, route in ROUTES.items():
            for method in route.expect:
                path = route.path.format(**things.fresh())
                before = things.state()
                answer = visitor.request(method, path)
                signin = answer.status_code == 302 and answer.headers["location"].startswith(
                    "/signin"
                )
                refused = method == "POST" and answer.status_code == 403  # no CSRF cookie
                if not (signin or refused) or things.state() != before:
                    wrong.append(f"{method} {name}: {answer.status_code}")
    assert wrong == []


# --- WebSockets --------------------------------------------------------------------------------


def socket_opens(server: DaphneServer, path: str, user: User | None) -> bool:
    """Whether the server accepts the socket (a consumer that refuses closes it before the
    handshake completes: a 403 to the upgrade)."""
    headers = {"Cookie": f"sessionid={session_cookie(user)}"} if user is not None else {}
    url = server.url.replace("http://", "ws://", 1) + path
    try:
        with connect(
            url, origin=Origin(server.url), additional_headers=headers, proxy=None, open_timeout=30
        ):
            return True
    except InvalidStatus:
        return False


def signed_out_close_code(server: DaphneServer, path: str) -> int | None:
    """The code the server closes a socket without a session with (None: it stayed open)."""
    url = server.url.replace("http://", "ws://", 1) + path
    with connect(url, origin=Origin(server.url), proxy=None, open_timeout=30) as socket:
        try:
            socket.recv(timeout=30)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else None
        except TimeoutError:
            return None
    return None


SOCKET_OPENS: dict[str, Callable[[str], bool]] = {
    # The timeline needs tasks:audit:read on the task (every role implies it); the approvals
    # queue the supervisor role.
    "/ws/tasks/{task}/timeline": lambda role: True,
    "/ws/approvals": lambda role: role == "supervisor",
    "/ws/queue": lambda role: False,  # without a token of the person's rows, for no one
    "/ws/batches/{batch}": lambda role: True,  # its namespace's people, as its page
    "/ws/decisions": lambda role: True,  # anyone signed in, for their own decisions
    "/ws/notifications": lambda role: True,  # anyone signed in, for their own notifications
}


@pytest.mark.parametrize("role", ROLES)
def test_sockets_open_for_the_namespaces_people_by_role_only(
    orbit_server: DaphneServer, things: Things, role: str, live_db: None
) -> None:
    subject = things.fresh()
    opened = {
        path: socket_opens(orbit_server, path.format(**subject), person(things, "own", role).user)
        for path in SOCKETS.values()
    }
    assert opened == {path: SOCKET_OPENS[path](role) for path in SOCKETS.values()}
    outsiders = {
        kind: socket_opens(
            orbit_server,
            SOCKETS["ws/tasks/<str:task_id>/timeline"].format(**subject),
            person(things, kind, role).user,
        )
        for kind in OUTSIDERS
    }
    assert outsiders == dict.fromkeys(OUTSIDERS, False)
    everywhere = person(things, "everywhere", role).user
    for path in SOCKETS.values():
        assert socket_opens(orbit_server, path.format(**subject), everywhere) == opened[path]


def test_a_signed_out_socket_is_told_so_on_every_route(
    orbit_server: DaphneServer, things: Things, live_db: None
) -> None:
    """No session: every socket is closed with 4401 as soon as it is answered (accepted first,
    so that the page can say "signed out" rather than retry for ever: ops/sockets.py)."""
    subject = things.fresh()
    assert {
        path: signed_out_close_code(orbit_server, path.format(**subject))
        for path in SOCKETS.values()
    } == dict.fromkeys(SOCKETS.values(), CLOSE_UNAUTHENTICATED)
