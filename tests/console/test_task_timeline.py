"""The task page shows the timeline through ``CONSOLE_TASK_TIMELINE`` (docs/architecture.md):
the console does not import the timeline app, and the page stands without it."""

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from orbit_console.console.views import tasks
from tests.support.people import make_person
from tests.timeline.helpers import session_cookie


@pytest.fixture
def timeline_setting() -> Iterator[None]:
    tasks._timeline_of.cache_clear()
    yield
    tasks._timeline_of.cache_clear()


def task_page(world: dict[str, Any], task_id: str) -> httpx.Response:
    from django.core.asgi import get_asgi_application

    person = make_person(world, "operator")
    cookie = session_cookie(person.user)

    async def get() -> httpx.Response:
        transport = httpx.ASGITransport(app=get_asgi_application())
        async with httpx.AsyncClient(
            transport=transport, base_url="http://localhost", cookies={"sessionid": cookie}
        ) as client:
            return await client.get(f"/tasks/{task_id}")

    return asyncio.run(get())


def test_the_task_page_shows_the_timeline_the_setting_names(
    settings: Any, world: dict[str, Any], timeline_setting: None
) -> None:
    page = task_page(world, world["tasks"]["needs_review"])
    assert page.status_code == 200
    assert 'aria-labelledby="timeline-title"' in page.text


def test_without_a_timeline_the_task_page_stands_alone(
    settings: Any, world: dict[str, Any], timeline_setting: None
) -> None:
    settings.CONSOLE_TASK_TIMELINE = ""
    page = task_page(world, world["tasks"]["needs_review"])
    assert page.status_code == 200
    assert 'aria-labelledby="timeline-title"' not in page.text
    assert world["tasks"]["needs_review"] in page.text  # the rest of the page is there
