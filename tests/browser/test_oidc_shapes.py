"""Every documented provider's shape end to end in Chromium (issue 40 item 3): for each worked
example of docs/sign-in.md, the suite's provider shaped as that provider is
(``tests/support/oidc_shapes.py``: an issuer ending in "/", no refresh token, ``auth_time`` only
when asked, groups in another claim, no back-channel logout, scopes refused, no
``prompt=login``), and the console set up with the example exactly as written.

One short flow per shape: sign in through the console's button and the provider's own form,
with the role of the example's first rule; step up before deciding, as that provider allows
(the provider asks for the password again, or — Google — answers with its own ``auth_time``);
and the logout the provider offers: a back-channel logout ends the session, or the provider
has none to send.

Cheap by design: one console for the whole module, served in this process (uvicorn in a
thread), so each shape is a change of settings, not a server's start; each provider starts
once, at its shape's test.
"""

import asyncio
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import uvicorn
from django.contrib.auth.models import User
from django.contrib.sessions.backends.db import SessionStore
from playwright.sync_api import Page, expect

from orbit_console.signin.models import OidcIdentity
from orbit_console.signin.stepup import AUTH
from tests.support.oidc import OidcProvider, console_client
from tests.support.oidc_shapes import SHAPES, Shape, admitted_by_first_rule, configure
from tests.support.oidc_signin import CLIENT_ID, CLIENT_SECRET
from tests.support.servers import free_port, wait_answering

pytestmark = [pytest.mark.browser, pytest.mark.system_extra]


class InProcessConsole:
    """The console's ASGI application (as ``orbit_console.asgi`` builds its HTTP side) under
    uvicorn in a thread of this process: it reads this process's settings. Its sockets (the
    pages' live parts) are refused: these flows are pages and redirects."""

    def __init__(self) -> None:
        from orbit_console.ops.edge import Edge
        from orbit_console.ops.handler import get_api_application, get_asgi_application

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.loop: asyncio.AbstractEventLoop | None = None
        application = Edge(get_asgi_application(), api=get_api_application())

        async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
            self.loop = asyncio.get_running_loop()
            if scope["type"] == "websocket":  # no live parts here: refused, as by a proxy
                await receive()
                await send({"type": "websocket.close", "code": 1013})
                return
            await application(scope, receive, send)

        self.server = uvicorn.Server(
            uvicorn.Config(
                app, host="127.0.0.1", port=self.port, lifespan="off", log_level="warning"
            )
        )
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> "InProcessConsole":
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            assert time.monotonic() < deadline, "the in-process console did not start"
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        from asgiref.sync import sync_to_async
        from django.db import connections

        if self.loop is not None:  # its database connections live in its threads
            closing = asyncio.run_coroutine_threadsafe(
                sync_to_async(connections.close_all)(), self.loop
            )
            closing.result(timeout=10)
        self.server.should_exit = True
        self.thread.join(timeout=10)


@pytest.fixture(scope="module")
def console(django_db_setup: None, django_db_blocker: Any) -> Iterator[InProcessConsole]:
    with django_db_blocker.unblock():
        served = InProcessConsole().start()
        wait_answering(f"{served.url}/health/live", _Alive(served), 30)
    yield served
    with django_db_blocker.unblock():
        served.stop()


class _Alive:
    """What ``wait_answering`` asks of a process, for the server's thread."""

    def __init__(self, served: InProcessConsole) -> None:
        self.served = served

    def poll(self) -> int | None:
        return None if self.served.thread.is_alive() else 1


@pytest.fixture(scope="module")
def namespace(django_db_setup: None, django_db_blocker: Any) -> str:
    from orbit_console.ledger.lifecycle import namespace_create

    with django_db_blocker.unblock():
        created, _ = namespace_create(name=f"shapes-{time.time_ns()}")
    return str(created.id)


@pytest.fixture(scope="module")
def idp_of(console: InProcessConsole) -> Iterator[Callable[[Shape], OidcProvider]]:
    """The provider of a shape, started at first use with the console as its client."""
    started: dict[str, OidcProvider] = {}

    def of(shape: Shape) -> OidcProvider:
        if shape.heading not in started:
            client = console_client(console.url, CLIENT_ID, CLIENT_SECRET)
            started[shape.heading] = OidcProvider(shape.quirks).start([client])
        return started[shape.heading]

    yield of
    for provider in started.values():
        provider.stop()


def sign_in_at_the_provider(page: Page, login: str) -> None:
    page.fill("input[name=login]", login)
    page.fill("input[name=password]", "any password")
    page.locator("button[type=submit]").click()


def session_of(page: Page) -> SessionStore:
    [key] = [c["value"] for c in page.context.cookies() if c["name"] == "sessionid"]
    return SessionStore(session_key=key)


@pytest.mark.parametrize("name", list(SHAPES))
def test_the_documented_example_signs_in_steps_up_and_logs_out_as_its_provider_allows(
    name: str,
    page: Page,
    console: InProcessConsole,
    idp_of: Callable[[Shape], OidcProvider],
    namespace: str,
    settings: Any,
    live_db: None,
) -> None:
    shape = SHAPES[name]
    idp = idp_of(shape)
    env = configure(settings, shape, idp, namespace=namespace)
    login = f"{name}-{time.time_ns()}"
    admitted_by_first_rule(idp, login, env)

    page.goto(f"{console.url}/signin")
    page.locator("#oidc-signin").click()
    sign_in_at_the_provider(page, login)
    expect(page.locator("header .who")).to_contain_text(login)
    user = OidcIdentity.objects.select_related("user").get(subject=login).user
    expected = {"Google": {"auditor"}}.get(shape.heading, {"supervisor", "operator"})
    assert set(user.groups.values_list("name", flat=True)) == expected

    # Step up, as the provider allows: asked for the password again, or (Google, which takes
    # no prompt=login) its own word of when the person last signed in there.
    asked_at = int(time.time())
    page.goto(f"{console.url}/signin/confirm?next=/decisions")
    if settings.OIDC_STEP_UP == "login":
        expect(page.locator("input[name=login]")).to_be_visible()
        sign_in_at_the_provider(page, login)
    expect(page).to_have_url(f"{console.url}/decisions")
    authenticated = session_of(page)[AUTH]
    assert authenticated["method"] == "oidc"
    if settings.OIDC_STEP_UP == "login":
        assert authenticated["at"] >= asked_at

    # The logout it offers: back-channel logout ends the session at once, or none comes.
    sent = idp.backchannel_logout(login)
    if shape.quirks.backchannel_logout:
        assert [delivery["ok"] for delivery in sent] == [True], sent
        page.goto(f"{console.url}/decisions")
        expect(page).to_have_url(f"{console.url}/signin?next=/decisions")
    else:
        assert sent == []
        page.goto(f"{console.url}/decisions")
        expect(page.locator("header .who")).to_contain_text(login)
    assert User.objects.filter(pk=user.pk).exists()


def test_the_shapes_differ_as_their_providers_do() -> None:
    """What the module runs through: every quirk of issue 40 item 3 in at least one shape."""
    quirks = [shape.quirks for shape in SHAPES.values()]
    assert any(q.issuer_trailing_slash for q in quirks)
    assert any(not q.refresh_tokens for q in quirks)
    assert any(q.auth_time == "when_asked" for q in quirks)
    assert any(q.groups_claim != "groups" for q in quirks)
    assert any(not q.backchannel_logout for q in quirks)
    assert any(not q.prompt_login for q in quirks)
    assert any(q.scopes is not None for q in quirks)
