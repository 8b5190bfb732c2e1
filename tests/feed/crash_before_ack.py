"""``manage.py feed run`` that dies after applying a ``task.completed`` event — its effect and
inbox record committed — and before acknowledging it: a consumer killed at the worst moment
(tests/feed/test_feed_processes.py). Exits 17 there."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "orbit_console.settings")

import django

django.setup()

from django.core.management import call_command  # noqa: E402

from orbit_console.client import events  # noqa: E402
from orbit_console.feed import consumer  # noqa: E402

applied: list[str] = []
apply = consumer.event_apply
ack = events.EventStreamConnection.ack


def remembering_apply(*args, **kwargs):  # type: ignore[no-untyped-def]
    applied.append(args[1].type)
    return apply(*args, **kwargs)


async def dying_ack(self, proof):  # type: ignore[no-untyped-def]
    if applied and applied[-1] == "task.completed":
        os._exit(17)
    await ack(self, proof)


consumer.event_apply = remembering_apply
events.EventStreamConnection.ack = dying_ack  # type: ignore[method-assign]
call_command("feed", "run")
