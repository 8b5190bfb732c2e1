"""The work a server process does beside serving (ops/background.py), and where batches are
sent from (decisions/batchworker.py ``sends_here``, docs/bulk.md)."""

import asyncio
from typing import Any

import pytest

from orbit_console.decisions.batchworker import sends_here
from orbit_console.ops import background
from orbit_console.ops.background import Background

REDIS_LAYER = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
MEMORY_LAYER = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "seen", "scope": scope["type"]})


def test_services_start_with_the_first_connection_once_and_come_back_after_a_failure(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(background, "RESTART_AFTER_SECONDS", 0.01)
    runs: list[str] = []

    async def flaky(stop: asyncio.Event) -> None:
        runs.append("run")
        if len(runs) == 1:
            raise RuntimeError("a bug in one round")
        await stop.wait()

    wrapped = Background(_app, services=[flaky])

    async def scenario() -> None:
        sent: list[dict[str, Any]] = []

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await wrapped({"type": "lifespan"}, None, send)
        await asyncio.sleep(0.05)
        assert runs == []  # lifespan is not a connection: daphne never sends it
        for kind in ("http", "websocket", "http"):
            await wrapped({"type": kind}, None, send)
        for _ in range(100):
            if len(runs) == 2:
                break
            await asyncio.sleep(0.01)
        assert runs == ["run", "run"]  # started once, started again after its failure
        assert [m["scope"] for m in sent] == ["lifespan", "http", "websocket", "http"]
        wrapped.stop.set()
        await asyncio.gather(*wrapped.tasks)
        assert not wrapped.tasks

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("setting", "layers", "server", "reconciler"),
    [
        ("auto", MEMORY_LAYER, True, False),  # the demo: only the server's sockets hear it
        ("auto", REDIS_LAYER, False, True),  # deployed: the reconciler's pushes reach them all
        ("server", REDIS_LAYER, True, False),
        ("reconciler", MEMORY_LAYER, False, True),
    ],
)
def test_batches_are_sent_where_their_pushes_reach_the_sockets(
    settings: Any, setting: str, layers: dict[str, Any], server: bool, reconciler: bool
) -> None:
    settings.CONSOLE_BATCH_WORKER = setting
    settings.CHANNEL_LAYERS = layers
    assert (sends_here("server"), sends_here("reconciler")) == (server, reconciler)
