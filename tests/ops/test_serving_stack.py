"""The request path of issue 12, in one process: Django's synchronous middleware grouped into one
thread hop each way (``SyncMiddlewareGroup``) behaves exactly as Django's own chain of the same
middleware; the deploy checks still see the security middleware; and the shared-thread handler
runs every request's synchronous work on one thread, where Django's stock handler starts a
thread per request.

This module is also the URL configuration of those tests (``ROOT_URLCONF``).
"""

import asyncio
import secrets
import threading
from typing import Any

import httpx
import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured, SuspiciousOperation
from django.core.handlers.asgi import ASGIHandler
from django.core.handlers.base import BaseHandler
from django.http import HttpRequest, HttpResponse
from django.test import RequestFactory
from django.urls import path
from django.utils.deprecation import MiddlewareMixin

from orbit_console.ops.checks import grouped_middleware
from orbit_console.ops.handler import ApiHandler, SharedThreadASGIHandler
from orbit_console.ops.middleware import SyncMiddlewareGroup

MODULE = __name__
GROUP = "orbit_console.ops.middleware.SyncMiddlewareGroup"

# --- Recording middleware and views -------------------------------------------------------------

EVENTS: list[str] = []


class Recorded(MiddlewareMixin):
    """Notes each hook it runs; ``request.plan`` says which hook answers or raises."""

    name = ""

    def _act(self, request: HttpRequest, hook: str) -> HttpResponse | None:
        EVENTS.append(f"{self.name}.{hook}")
        action = request.plan.get(f"{self.name}.{hook}")  # type: ignore[attr-defined]
        if action == "raise":
            raise SuspiciousOperation(f"{self.name}.{hook} refused")
        if action == "answer":
            return HttpResponse(f"answered by {self.name}.{hook}", status=299)
        return None

    def process_request(self, request: HttpRequest) -> HttpResponse | None:
        return self._act(request, "request")

    def process_view(self, request: HttpRequest, *args: Any) -> HttpResponse | None:
        return self._act(request, "view")

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        return self._act(request, "exception")

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        EVENTS.append(f"{self.name}.response({response.status_code})")
        if request.plan.get(f"{self.name}.response") == "raise":  # type: ignore[attr-defined]
            raise SuspiciousOperation(f"{self.name}.response refused")
        response[f"X-Seen-By-{self.name}"] = "yes"
        return response


class A(Recorded):
    name = "a"


class B(Recorded):
    name = "b"


class C(Recorded):
    name = "c"


MEMBERS = [f"{MODULE}.A", f"{MODULE}.B", f"{MODULE}.C"]


def plain(request: HttpRequest) -> HttpResponse:
    EVENTS.append("view")
    if request.plan.get("view") == "raise":  # type: ignore[attr-defined]
        raise ValueError("the view failed")
    return HttpResponse("view")


_THREAD = threading.local()


def thread_of(request: HttpRequest) -> HttpResponse:
    """A token of the thread that runs this sync view (thread idents are reused, tokens not)."""
    if not hasattr(_THREAD, "token"):
        _THREAD.token = secrets.token_hex(8)
    return HttpResponse(_THREAD.token)


def handler400(request: HttpRequest, exception: Exception) -> HttpResponse:
    return HttpResponse("bad request", status=400)


def handler500(request: HttpRequest) -> HttpResponse:
    return HttpResponse("server error", status=500)


urlpatterns = [path("plain", plain), path("thread", thread_of)]

# Every hook that can answer or raise, alone; and the view failing (process_exception).
PLANS = [
    {},
    {"view": "raise"},
    *(
        {f"{m}.{hook}": act}
        for m in "abc"
        for hook in ("request", "view")
        for act in ("answer", "raise")
    ),
    *({f"{m}.response": "raise"} for m in "abc"),
    *({"view": "raise", f"{m}.exception": "answer"} for m in "abc"),
]


def run_chain(settings: Any, plan: dict[str, str], *, grouped: bool) -> tuple[list[str], Any]:
    settings.ROOT_URLCONF = MODULE
    settings.DEBUG_PROPAGATE_EXCEPTIONS = False
    if grouped:
        settings.MIDDLEWARE = [GROUP]
        settings.SYNC_MIDDLEWARE = MEMBERS
    else:
        settings.MIDDLEWARE = MEMBERS
    request = RequestFactory().get("/plain")
    request.plan = plan  # type: ignore[attr-defined]
    EVENTS.clear()
    handler = BaseHandler()
    handler.load_middleware(is_async=grouped)
    if grouped:
        response = async_to_sync(handler.get_response_async)(request)
    else:
        response = handler.get_response(request)
    headers = sorted(name for name in response.headers if name.startswith("X-Seen-By"))
    return list(EVENTS), (response.status_code, response.content, headers)


@pytest.mark.parametrize(
    "plan", PLANS, ids=lambda plan: ",".join(f"{k}={v}" for k, v in plan.items()) or "plain"
)
def test_the_group_runs_hooks_exactly_as_djangos_own_chain(
    settings: Any, plan: dict[str, str]
) -> None:
    """Same hooks, same order, same answer, whichever hook answers or raises (issue 12)."""
    expected = run_chain(settings, plan, grouped=False)
    assert run_chain(settings, plan, grouped=True) == expected


def counted_hops(module: Any, monkeypatch: Any) -> list[str]:
    """The names of the functions ``module`` sends to the sync thread from now on."""
    hops: list[str] = []
    real = module.sync_to_async

    def counting(function: Any, **kwargs: Any) -> Any:
        hops.append(function.__name__)
        return real(function, **kwargs)

    monkeypatch.setattr(module, "sync_to_async", counting)
    return hops


def test_the_group_hops_to_the_sync_thread_once_each_way(settings: Any, monkeypatch: Any) -> None:
    """Two hops for the request and response hooks of all nine middleware, not one per hook
    (the view hooks take one more, made by Django's handler)."""
    from orbit_console.ops import middleware

    hops = counted_hops(middleware, monkeypatch)
    run_chain(settings, {}, grouped=True)
    assert hops == ["_request_phase", "_response_phase"]


def test_the_group_refuses_middleware_it_could_not_run_faithfully(settings: Any) -> None:
    """HtmxMiddleware has its own __call__: grouped, it would silently do nothing."""
    settings.SYNC_MIDDLEWARE = [*MEMBERS, "django_htmx.middleware.HtmxMiddleware"]
    with pytest.raises(ImproperlyConfigured, match="move HtmxMiddleware to MIDDLEWARE"):
        SyncMiddlewareGroup(plain_async)


async def plain_async(request: HttpRequest) -> HttpResponse:
    return HttpResponse("never called")


def test_the_deploy_check_sees_the_grouped_security_middleware(settings: Any) -> None:
    """Django's own middleware checks are silenced; orbit.W003 asks the same of both lists."""
    assert grouped_middleware(None) == []
    settings.SYNC_MIDDLEWARE = [
        path for path in settings.SYNC_MIDDLEWARE if not path.endswith("CsrfViewMiddleware")
    ]
    warnings = grouped_middleware(None)
    assert [warning.id for warning in warnings] == ["orbit.W003"]
    assert "CsrfViewMiddleware" in warnings[0].msg


# --- One sync thread a process ------------------------------------------------------------------


async def threads_serving(handler: ASGIHandler, requests: int) -> set[str]:
    transport = httpx.ASGITransport(app=handler)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
        answers = [await client.get("/thread") for _ in range(requests)]
    assert {answer.status_code for answer in answers} == {200}
    return {answer.text for answer in answers}


def test_every_requests_sync_work_runs_on_one_thread(settings: Any, live_db: None) -> None:
    """Django's handler gives each request a thread of its own (and with it a new database
    connection); the shared-thread handler reuses one thread for all of them. (The database:
    the end of each request looks at the thread's connection, close_old_connections.)"""
    settings.ROOT_URLCONF = MODULE
    assert len(asyncio.run(threads_serving(ASGIHandler(), 3))) == 3
    assert len(asyncio.run(threads_serving(SharedThreadASGIHandler(), 3))) == 1


# --- The recovery API's handler: its own chain, one hop -----------------------------------------


def context_seen(request: HttpRequest) -> HttpResponse:
    """What an API view finds around it: its language and time zone, and whether the console's
    chain (sessions, people) ran."""
    from django.utils import timezone, translation

    seen = [translation.get_language(), timezone.get_current_timezone_name()]
    seen.append("session" if hasattr(request, "session") else "no session")
    return HttpResponse(" ".join(seen))


urlpatterns += [path("v1/seen", context_seen), path("v1/thread", thread_of)]


def api_handler(settings: Any) -> ApiHandler:
    settings.ROOT_URLCONF = MODULE
    return ApiHandler()


def test_an_api_request_is_served_in_one_hop(
    settings: Any, monkeypatch: Any, live_db: None
) -> None:
    """The request signals, API_MIDDLEWARE, the view and closing the response: one hop to the
    sync thread, where Django's handler makes one per signal, per sync middleware and for the
    view (issue 12)."""
    from orbit_console.ops import handler as handlers

    hops = counted_hops(handlers, monkeypatch)
    handler = api_handler(settings)

    async def twice() -> list[str]:
        transport = httpx.ASGITransport(app=handler)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return [(await c.get("/v1/thread")).text for _ in range(2)]

    first, second = asyncio.run(twice())
    assert first == second, "the API's sync work ran on two threads"
    assert hops == ["_respond", "_respond"]


def test_the_api_runs_its_own_chain_in_english_and_utc(settings: Any, live_db: None) -> None:
    """Called in-process from a console page in another language and zone, the API answers
    as it would over the network: English, UTC, and none of the console's chain."""
    from django.utils import timezone, translation

    handler = api_handler(settings)

    async def from_a_chinese_page() -> httpx.Response:
        translation.activate("zh-hans")
        timezone.activate("Asia/Shanghai")
        transport = httpx.ASGITransport(app=handler)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as c:
            return await c.get("/v1/seen", headers={"Accept-Language": "zh-hans"})

    answer = asyncio.run(from_a_chinese_page())
    assert answer.text == "en UTC no session"
    assert "set-cookie" not in answer.headers
    assert answer.headers["x-content-type-options"] == "nosniff"
    assert answer.headers["x-frame-options"] == "DENY"
    assert len(answer.headers["x-request-id"]) == 32


def test_the_api_chain_refuses_async_only_middleware(settings: Any) -> None:
    settings.API_MIDDLEWARE = [
        *settings.API_MIDDLEWARE,
        "orbit_console.console.middleware.TimezoneMiddleware",
    ]
    settings.ROOT_URLCONF = MODULE
    with pytest.raises(ImproperlyConfigured, match="TimezoneMiddleware"):
        ApiHandler()
