"""The embedded API reached in-process (issue 12): the same request through Django's handler,
without the network — the API's host check, bearer auth and answers apply; the caller's
language and time zone are untouched by the API's middleware; the read timeout still bounds
the call."""

import asyncio
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone, translation

from orbit_console.client import OrbitClient, OrbitError, OutcomeUnknown, inprocess
from orbit_console.client.inprocess import InProcessTransport


def embedded(token: str, *, timeout: float = 30) -> OrbitClient:
    return OrbitClient(inprocess.base_url(), token, transport=InProcessTransport(timeout=timeout))


def test_an_in_process_call_leaves_the_callers_language_and_time_zone(
    world: dict[str, Any], settings: Any
) -> None:
    """The API's own request activates English and UTC; the console request that called it
    keeps rendering in its person's language and zone afterwards."""
    task_id = world["tasks"]["needs_review"]

    async def call() -> tuple[str, str | None, str]:
        translation.activate("zh-hans")
        timezone.activate(ZoneInfo("Asia/Shanghai"))
        async with embedded(world["tokens"]["admin"]) as orbit:
            task = await orbit.get_task(task_id)
        return task.id, translation.get_language(), timezone.get_current_timezone_name()

    assert asyncio.run(call()) == (task_id, "zh-hans", "Asia/Shanghai")


def test_an_in_process_call_passes_the_host_check_of_a_production_host_list(
    world: dict[str, Any], settings: Any
) -> None:
    """The API checks the Host header as it does for any request: the in-process client names
    a host this deployment answers to."""
    settings.ALLOWED_HOSTS = [".console.example.com", "console-1"]
    assert inprocess.base_url() == "http://console.example.com"

    async def call() -> str:
        async with embedded(world["tokens"]["admin"]) as orbit:
            return (await orbit.get_task(world["tasks"]["failed"])).state

    assert asyncio.run(call()) == "FAILED"


def test_an_in_process_call_is_authenticated_like_any_other_C1(world: dict[str, Any]) -> None:
    async def call() -> None:
        async with embedded("orb_not-a-token") as orbit:
            await orbit.get_task(world["tasks"]["failed"])

    with pytest.raises(OrbitError) as refused:
        asyncio.run(call())
    assert (refused.value.status, refused.value.code) == (401, "UNAUTHENTICATED")


def test_an_in_process_call_without_an_answer_in_time_is_an_unknown_outcome_C9(
    world: dict[str, Any],
) -> None:
    async def call() -> None:
        async with embedded(world["tokens"]["admin"], timeout=0) as orbit:
            await orbit.get_task(world["tasks"]["failed"])

    with pytest.raises(OutcomeUnknown, match="no answer in time"):
        asyncio.run(call())
