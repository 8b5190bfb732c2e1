"""Load shedding (issue 34, capacity): a console process serves at most
``CONSOLE_MAX_IN_FLIGHT`` page requests at once and answers the next ones at once with 503,
``Retry-After`` and the styled, translated page that says the console is busy and that nothing
was done; the health endpoints, the metrics and the recovery API are never shed; once a request
ends, the next one is served. Through the process's real ASGI handler and middleware.

This module is also the URL configuration of these tests (``ROOT_URLCONF``): the console's own
URLs and ``/held``, a page that stays in flight until the test lets it go.

The whole drill (one replica driven past its capacity by people deciding): ``bench/drills/
capacity.py``, docs/reliability.md.
"""

import asyncio
import re
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from django.http import HttpRequest, HttpResponse
from django.urls import path

from orbit_console.ops.handler import SharedThreadASGIHandler
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

type Test = Callable[[httpx.AsyncClient, Callable[[], Awaitable[None]]], Awaitable[None]]


def run_with_held(settings: Any, limit: int, held_requests: int, test: Test) -> None:
    """A process (the real handler and middleware, ``CONSOLE_MAX_IN_FLIGHT=limit``) serving
    ``held_requests`` requests that stay in flight while ``test`` runs; ``test`` gets a client
    and a function that lets them go and waits for their answers (200)."""
    settings.ROOT_URLCONF = MODULE
    settings.CONSOLE_MAX_IN_FLIGHT = limit
    settings.CONSOLE_SHED_RETRY_AFTER_SECONDS = 3
    settings.METRICS_TOKEN = TOKEN
    handler = SharedThreadASGIHandler()

    async def main() -> None:
        RELEASE["go"] = asyncio.Event()
        transport = httpx.ASGITransport(app=handler)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            pending = []
            for _ in range(held_requests):
                ENTERED["in"] = asyncio.Event()
                pending.append(asyncio.create_task(client.get("/held")))
                await asyncio.wait_for(ENTERED["in"].wait(), 10)

            async def release() -> None:
                RELEASE["go"].set()
                answers = await asyncio.gather(*pending)
                assert [a.status_code for a in answers] == [200] * held_requests

            try:
                await test(client, release)
            finally:
                RELEASE["go"].set()
                await asyncio.gather(*pending, return_exceptions=True)

    asyncio.run(main())


TOKEN = secrets.token_urlsafe(16)


def shed_count(exposition: str) -> float:
    found = re.search(r"^orbit_http_requests_shed_total (\S+)$", exposition, re.M)
    assert found, "orbit_http_requests_shed_total is not exported"
    return float(found.group(1))


async def metrics(client: httpx.AsyncClient) -> str:
    answer = await client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert answer.status_code == 200, "the scrape was shed"
    return answer.text


def test_beyond_its_bound_a_process_answers_503_busy_and_serves_again_once_one_ends(
    settings: Any, live_db: None
) -> None:
    async def test(client: httpx.AsyncClient, release: Callable[[], Awaitable[None]]) -> None:
        shed_before = shed_count(await metrics(client))
        page = await client.get("/signin")
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
        assert (await client.get("/health/ready")).status_code == 200
        assert (await client.get("/health/live")).status_code == 200
        assert shed_count(await metrics(client)) == shed_before + 1
        await release()
        assert (await client.get("/signin")).status_code == 200

    run_with_held(settings, limit=2, held_requests=2, test=test)


def test_a_shed_post_says_in_the_persons_language_that_nothing_was_stored(
    settings: Any, live_db: None
) -> None:
    async def test(client: httpx.AsyncClient, release: Callable[[], Awaitable[None]]) -> None:
        page = await client.post(
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
        await release()

    run_with_held(settings, limit=1, held_requests=1, test=test)


def test_the_recovery_api_is_not_bounded_by_the_pages_in_flight(
    settings: Any, live_db: None
) -> None:
    """The API has its own quotas and 429s: a full console does not shed its calls."""

    async def test(client: httpx.AsyncClient, release: Callable[[], Awaitable[None]]) -> None:
        answer = await client.get("/v1/tasks/0123456789abcdef0123456789abcdef")
        assert answer.status_code == 401  # asked without a token: answered, not shed
        assert (await client.get("/signin")).status_code == 503
        await release()

    run_with_held(settings, limit=1, held_requests=1, test=test)


def test_a_bound_of_zero_sheds_nothing(settings: Any, live_db: None) -> None:
    async def test(client: httpx.AsyncClient, release: Callable[[], Awaitable[None]]) -> None:
        assert (await client.get("/signin")).status_code == 200
        await release()

    run_with_held(settings, limit=0, held_requests=3, test=test)
