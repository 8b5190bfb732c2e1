"""Load shedding (issue 34, capacity; issue 40, the anonymous lane): a console process serves at
most ``CONSOLE_MAX_IN_FLIGHT`` signed-in people's page requests at once, and beside them at most
``CONSOLE_ANONYMOUS_MAX_IN_FLIGHT`` anonymous ones, of which
``CONSOLE_ANONYMOUS_MAX_IN_FLIGHT_PER_ADDRESS`` from one address; it answers the next ones at once
with 503, ``Retry-After`` and the styled, translated page that says the console is busy and that
nothing was done; the health endpoints, the metrics and the recovery API are never shed; once a
request ends, the next one is served. A request is a signed-in person's when it carries the pass
of its session (``ops/lanes.py``). Through the process's real ASGI handler and middleware.

This module is also the URL configuration of these tests (``ROOT_URLCONF``): the console's own
URLs and ``/held``, a page that stays in flight until the test lets it go.

The whole drill (one replica driven past its capacity by people deciding): ``bench/drills/
capacity.py``, docs/reliability.md. A flood of anonymous requests against real servers, with a
real identity provider: ``tests/ops/test_anonymous_edge.py``.
"""

import asyncio
import re
import secrets
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from django.conf import settings as django_settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.contrib.auth.models import User
from django.http import HttpRequest, HttpResponse
from django.test import Client
from django.urls import path

from orbit_console.ops.handler import SharedThreadASGIHandler
from orbit_console.ops.lanes import SIGNED_IN_COOKIE, client_address, make_pass
from orbit_console.urls import urlpatterns as console_urls

MODULE = __name__
RELEASE: dict[str, asyncio.Event] = {}
ENTERED: dict[str, asyncio.Event] = {}


async def held(request: HttpRequest) -> HttpResponse:
    """In flight until the test sets ``RELEASE["go"]``."""
    ENTERED["in"].set()
    await RELEASE["go"].wait()
    return HttpResponse("served")


urlpatterns = [*console_urls, path("held", held)]

TOKEN = secrets.token_urlsafe(16)


class Edge:
    """One process (the real handler and middleware) and its clients: signed-in people (a real
    session and its pass) and anonymous ones, each from an address of its own."""

    def __init__(self, handler: SharedThreadASGIHandler, cookies: dict[str, str]) -> None:
        self.handler = handler
        self.cookies = cookies
        self.pending: list[asyncio.Task[httpx.Response]] = []
        self.clients: list[httpx.AsyncClient] = []

    def client(
        self,
        *,
        address: str = "127.0.0.1",
        signed_in: bool = False,
        cookies: dict[str, str] | None = None,
    ) -> httpx.AsyncClient:
        transport = httpx.ASGITransport(app=self.handler, client=(address, 40000))
        client = httpx.AsyncClient(
            transport=transport,
            base_url="http://127.0.0.1",
            cookies=self.cookies if signed_in else cookies,
        )
        self.clients.append(client)
        return client

    async def hold(self, client: httpx.AsyncClient, count: int = 1, **kwargs: Any) -> None:
        """``count`` requests of ``client`` in flight (each seen entering the view)."""
        for _ in range(count):
            ENTERED["in"] = asyncio.Event()
            self.pending.append(asyncio.create_task(client.get("/held", **kwargs)))
            await asyncio.wait_for(ENTERED["in"].wait(), 10)

    async def release(self) -> None:
        """Let the held requests go; each was served."""
        RELEASE["go"].set()
        answers = await asyncio.gather(*self.pending)
        assert [a.status_code for a in answers] == [200] * len(answers)
        self.pending = []


def signed_in_cookies() -> dict[str, str]:
    """A real signed-in session (in the database) of a new person, and its pass."""
    user = User.objects.create_user(username=f"lane-{secrets.token_hex(4)}")
    browser = Client()
    browser.force_login(user)
    key = browser.cookies[django_settings.SESSION_COOKIE_NAME].value
    return {django_settings.SESSION_COOKIE_NAME: key, SIGNED_IN_COOKIE: make_pass(key)}


@asynccontextmanager
async def serving(settings: Any, cookies: dict[str, str], **bounds: int) -> AsyncIterator[Edge]:
    settings.ROOT_URLCONF = MODULE
    settings.CONSOLE_SHED_RETRY_AFTER_SECONDS = 3
    settings.METRICS_TOKEN = TOKEN
    for name, value in bounds.items():
        setattr(settings, name, value)
    RELEASE["go"] = asyncio.Event()
    edge = Edge(SharedThreadASGIHandler(), cookies)
    try:
        yield edge
    finally:
        RELEASE["go"].set()
        await asyncio.gather(*edge.pending, return_exceptions=True)
        for client in edge.clients:
            await client.aclose()


type Test = Callable[[Edge], Awaitable[None]]


def run(settings: Any, test: Test, **bounds: int) -> None:
    """``test`` against a process with these settings (``CONSOLE_MAX_IN_FLIGHT=…`` and the
    like), a signed-in person's cookies at hand."""
    cookies = signed_in_cookies()

    async def main() -> None:
        async with serving(settings, cookies, **bounds) as edge:
            await test(edge)

    asyncio.run(main())


def counter(exposition: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{name}{re.escape(labels)} (\S+)$", exposition, re.M)
    assert found, f"{name}{labels} is not exported"
    return float(found.group(1))


def shed_count(exposition: str) -> float:
    return counter(exposition, "orbit_http_requests_shed_total")


async def metrics(client: httpx.AsyncClient) -> str:
    answer = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200, "the scrape was shed"
    return answer.text


async def sign_in_form(browser: httpx.AsyncClient, username: str, password: str) -> dict[str, str]:
    """The sign-in form's fields, with the CSRF token of its page."""
    page = await browser.get("/signin")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text)
    assert token, "the sign-in page carries no CSRF token"
    return {"csrfmiddlewaretoken": token.group(1), "username": username, "password": password}


def assert_busy(page: httpx.Response) -> None:
    assert page.status_code == 503
    assert page.headers["retry-after"] == "3"
    assert "The console is busy" in page.text


def test_beyond_its_bound_a_process_answers_503_busy_and_serves_again_once_one_ends(
    settings: Any, live_db: None
) -> None:
    async def test(edge: Edge) -> None:
        person = edge.client(signed_in=True)
        await edge.hold(person, 2)
        shed_before = shed_count(await metrics(person))
        page = await person.get("/decisions")
        assert page.status_code == 503
        assert page.headers["retry-after"] == "3"
        assert page.headers["cache-control"] == "no-store"
        assert len(page.headers["x-request-id"]) == 32
        assert "The console is busy" in page.text
        assert 'id="busy"' in page.text
        assert "Nothing was done with it." in page.text
        assert "Try again in 3 seconds." in page.text
        assert page.headers["x-request-id"] in page.text
        assert 'href="/static/' in page.text, "the busy page is the styled page"
        assert 'id="busy-not-stored"' not in page.text  # a GET sent nothing to store
        # Never shed: the probes and the scrape, which count the shed request.
        assert (await person.get("/health/ready")).status_code == 200
        assert (await person.get("/health/live")).status_code == 200
        assert shed_count(await metrics(person)) == shed_before + 1
        # The anonymous lane is another: the sign-in page is served meanwhile.
        assert (await edge.client().get("/signin")).status_code == 200
        await edge.release()
        assert (await person.get("/decisions")).status_code == 200

    run(settings, test, CONSOLE_MAX_IN_FLIGHT=2)


def test_a_shed_post_says_in_the_persons_language_that_nothing_was_stored(
    settings: Any, live_db: None
) -> None:
    async def test(edge: Edge) -> None:
        person = edge.client(signed_in=True)
        await edge.hold(person)
        page = await person.post(
            "/tasks/0123456789abcdef0123456789abcdef/review",
            data={"step": "confirm"},
            headers={"Accept-Language": "zh-Hans"},
        )
        assert page.status_code == 503
        assert page.headers["retry-after"] == "3"
        assert 'lang="zh-hans"' in page.text
        assert 'id="busy-not-stored"' in page.text
        assert "The console is busy" not in page.text, "not translated"
        assert "控制台正忙" in page.text
        await edge.release()

    run(settings, test, CONSOLE_MAX_IN_FLIGHT=1)


def test_the_recovery_api_is_not_bounded_by_the_pages_in_flight(
    settings: Any, live_db: None
) -> None:
    """The API has its own quotas and 429s: a full console does not shed its calls."""

    async def test(edge: Edge) -> None:
        person = edge.client(signed_in=True)
        await edge.hold(person)
        anonymous = edge.client()
        await edge.hold(anonymous)
        for client in (person, anonymous):
            answer = await client.get("/v1/tasks/0123456789abcdef0123456789abcdef")
            assert answer.status_code == 401  # asked without a token: answered, not shed
            assert (await client.get("/decisions")).status_code == 503
        await edge.release()

    run(settings, test, CONSOLE_MAX_IN_FLIGHT=1, CONSOLE_ANONYMOUS_MAX_IN_FLIGHT=1)


def test_a_bound_of_zero_sheds_nothing(settings: Any, live_db: None) -> None:
    async def test(edge: Edge) -> None:
        person, anonymous = edge.client(signed_in=True), edge.client()
        await edge.hold(person, 3)
        await edge.hold(anonymous, 3)
        assert (await person.get("/decisions")).status_code == 200
        assert (await anonymous.get("/signin")).status_code == 200
        await edge.release()

    run(
        settings,
        test,
        CONSOLE_MAX_IN_FLIGHT=0,
        CONSOLE_ANONYMOUS_MAX_IN_FLIGHT=0,
        CONSOLE_ANONYMOUS_MAX_IN_FLIGHT_PER_ADDRESS=0,
    )


# --- The anonymous lane (issue 40, item 5) ------------------------------------------------------


def test_anonymous_requests_never_take_the_places_of_signed_in_people(
    settings: Any, live_db: None
) -> None:
    """Issue 40: 48 anonymous ``GET /signin`` at once filled ``CONSOLE_MAX_IN_FLIGHT`` and a
    supervisor's pages were shed. Anonymous requests, from several addresses, fill their own
    lane: the next anonymous one is shed, a signed-in person's page is served."""

    async def test(edge: Edge) -> None:
        for address in ("203.0.113.1", "203.0.113.2", "203.0.113.3"):
            await edge.hold(edge.client(address=address))
        before = await metrics(edge.client())
        assert_busy(await edge.client(address="203.0.113.4").get("/signin"))
        person = edge.client(signed_in=True)
        page = await person.get("/decisions")
        assert page.status_code == 200, "a signed-in person's page was shed"
        # A page asked for without a signed-in session only sends to sign in: anonymous too.
        assert_busy(await edge.client(address="203.0.113.5").get("/decisions"))
        after = await metrics(person)
        assert shed_count(after) == shed_count(before)
        anonymous_shed = "orbit_http_anonymous_requests_shed_total"
        assert counter(after, anonymous_shed, '{reason="bound"}') == (
            counter(before, anonymous_shed, '{reason="bound"}') + 2
        )
        assert "orbit_http_anonymous_requests_in_flight 3.0" in after
        await edge.release()

    run(settings, test, CONSOLE_MAX_IN_FLIGHT=3, CONSOLE_ANONYMOUS_MAX_IN_FLIGHT=3)


def test_one_address_has_at_most_its_share_of_the_anonymous_lane(
    settings: Any, live_db: None
) -> None:
    async def test(edge: Edge) -> None:
        flooder = edge.client(address="198.51.100.7")
        await edge.hold(flooder, 2)
        before = await metrics(flooder)
        assert_busy(await flooder.get("/signin"))
        # Its other addresses in the same IPv6 /64 are the same subscriber.
        v6 = edge.client(address="2001:db8:1:2::1")
        await edge.hold(v6, 2)
        assert_busy(await edge.client(address="2001:db8:1:2:ffff::9").get("/signin"))
        assert (await edge.client(address="2001:db8:1:3::1").get("/signin")).status_code == 200
        assert (await edge.client(address="198.51.100.8").get("/signin")).status_code == 200
        after = await metrics(flooder)
        anonymous_shed = "orbit_http_anonymous_requests_shed_total"
        assert counter(after, anonymous_shed, '{reason="address"}') == (
            counter(before, anonymous_shed, '{reason="address"}') + 2
        )
        await edge.release()

    run(
        settings,
        test,
        CONSOLE_ANONYMOUS_MAX_IN_FLIGHT=8,
        CONSOLE_ANONYMOUS_MAX_IN_FLIGHT_PER_ADDRESS=2,
    )


def test_x_forwarded_for_is_not_believed_by_a_process_without_the_proxy_option(
    settings: Any, live_db: None
) -> None:
    """The address is the one the server was given (``REMOTE_ADDR``): a client that names
    other addresses in ``X-Forwarded-For`` does not get more than its share. Behind the proxy,
    ``serve --proxy-headers`` makes the server take the proxy's header
    (``tests/ops/test_anonymous_edge.py``)."""

    async def test(edge: Edge) -> None:
        flooder = edge.client(address="198.51.100.9")
        await edge.hold(flooder, headers={"X-Forwarded-For": "192.0.2.1"})
        await edge.hold(flooder, headers={"X-Forwarded-For": "192.0.2.2"})
        assert_busy(await flooder.get("/signin", headers={"X-Forwarded-For": "192.0.2.3"}))
        await edge.release()

    run(settings, test, CONSOLE_ANONYMOUS_MAX_IN_FLIGHT_PER_ADDRESS=2)


def test_a_session_cookie_without_its_pass_is_anonymous(settings: Any, live_db: None) -> None:
    """No session cookie and a forged one are both anonymous, and so is a real session with
    another session's pass, a pass made with another key, or a pass of a session that ended
    (spent when its answer said so)."""

    async def test(edge: Edge) -> None:
        await edge.hold(edge.client(address="192.0.2.10"))
        session = django_settings.SESSION_COOKIE_NAME
        real = edge.cookies[session]
        other = signed_in_cookies()
        shapes = {
            "no cookie": {},
            "a forged session": {session: secrets.token_hex(16)},
            "another session's pass": {session: real, SIGNED_IN_COOKIE: other[SIGNED_IN_COOKIE]},
            "no pass": {session: real},
            "a garbage pass": {session: real, SIGNED_IN_COOKIE: "1:" + "a" * 43},
        }
        for why, cookies in shapes.items():
            page = await edge.client(address="192.0.2.11", cookies=cookies).get("/decisions")
            assert page.status_code == 503, why
        # A pass of a session that has ended (the test makes one for a key the console never
        # gave): its first answer finds no session and spends it.
        ended = secrets.token_hex(16)
        kept = {session: ended, SIGNED_IN_COOKIE: make_pass(ended)}
        assert (await edge.client(cookies=kept).get("/decisions")).status_code == 302
        assert (await edge.client(cookies=kept).get("/decisions")).status_code == 503
        person = edge.client(signed_in=True)
        assert (await person.get("/decisions")).status_code == 200
        await edge.release()

    run(settings, test, CONSOLE_ANONYMOUS_MAX_IN_FLIGHT=1)


def test_signing_in_gives_the_pass_and_signing_out_takes_it_away(
    settings: Any, live_db: None
) -> None:
    password = secrets.token_urlsafe(12)
    user = User.objects.create_user(username=f"lane-{secrets.token_hex(4)}", password=password)

    async def test(edge: Edge) -> None:
        browser = edge.client(address="192.0.2.20")
        form = await sign_in_form(browser, user.username, password)
        signed_in = await browser.post("/signin", data=form)
        assert signed_in.status_code == 302
        assert SIGNED_IN_COOKIE in signed_in.cookies
        kept = {
            name: browser.cookies[name]
            for name in (django_settings.SESSION_COOKIE_NAME, SIGNED_IN_COOKIE)
        }
        # In the people's lane now, while the anonymous one is full.
        await edge.hold(edge.client(address="192.0.2.21"))
        assert (await browser.get("/decisions")).status_code == 200
        signed_out = await browser.post(
            "/signout", data={"csrfmiddlewaretoken": browser.cookies["csrftoken"]}
        )
        assert signed_out.status_code == 302
        assert SIGNED_IN_COOKIE not in browser.cookies, "the pass was not taken away"
        # The pass kept from the ended session is spent: anonymous.
        assert_busy(await edge.client(address="192.0.2.22", cookies=kept).get("/decisions"))
        await edge.release()

    run(settings, test, CONSOLE_ANONYMOUS_MAX_IN_FLIGHT=1)


CHECKING = threading.Event()  # a password check has begun
CHECKED = threading.Event()  # the test lets it end


class HeldHasher(PBKDF2PasswordHasher):
    """A password check that lasts until the test lets it end: Argon2id's 150 ms, stretched."""

    algorithm = "held"
    iterations = 1

    def verify(self, password: str, encoded: str) -> bool:
        CHECKING.set()
        CHECKED.wait(30)
        return bool(super().verify(password, encoded))


def test_a_password_being_checked_holds_no_signed_in_persons_page(
    settings: Any, live_db: None
) -> None:
    """Issue 40, item 5: a flood of wrong passwords held a supervisor's pages for seconds,
    though every one of them waited in the anonymous lane: each check (Argon2id) ran on the
    worker's one sync thread, which every page needs. A check now runs on a thread of its
    own: while one is under way, a signed-in person's page is served."""
    settings.PASSWORD_HASHERS = [f"{MODULE}.HeldHasher"]
    password = secrets.token_urlsafe(12)
    user = User.objects.create_user(username=f"lane-{secrets.token_hex(4)}", password=password)
    CHECKING.clear()
    CHECKED.clear()

    async def test(edge: Edge) -> None:
        browser = edge.client(address="192.0.2.30")
        form = await sign_in_form(browser, user.username, password)
        signing_in = asyncio.create_task(browser.post("/signin", data=form))
        try:
            assert await asyncio.to_thread(CHECKING.wait, 30), "the password was never checked"
            person = edge.client(signed_in=True)
            page = await asyncio.wait_for(person.get("/decisions"), 10)
            assert page.status_code == 200
            assert not signing_in.done()
        finally:
            CHECKED.set()
        assert (await signing_in).status_code == 302

    run(settings, test)


@pytest.mark.parametrize(
    ("given", "counted_as"),
    [
        ("203.0.113.9", "203.0.113.9"),
        ("::ffff:203.0.113.9", "203.0.113.9"),
        ("2001:db8:aa:bb:1:2:3:4", "2001:db8:aa:bb::/64"),
        ("", ""),
        ("not an address", "not an address"),
    ],
)
def test_the_address_counted_is_the_servers_remote_addr_ipv6_per_64(
    given: str, counted_as: str
) -> None:
    request = HttpRequest()
    request.META["REMOTE_ADDR"] = given
    assert client_address(request) == counted_as
