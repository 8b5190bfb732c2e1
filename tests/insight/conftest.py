"""Helpers for insight's tests: decisions made through the decisions' own services on a seeded
world, sent to the embedded recovery API in process (a real request through its handler), and
the rollups compared with what the facts make of them."""

import json
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync

from orbit_console.client import Task
from orbit_console.decisions.submissions import DecidedOn, waiting_since
from orbit_console.insight import tallies
from orbit_console.lib.errorcodes import error_code
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import orbit_client
from tests.support.people import TestPerson


def read(person: TestPerson, task_id: str) -> tuple[Task, str]:
    """The task and its last error code, as the wizard's verify step reads them with the
    person's credential."""
    credential = OrbitCredential.objects.get(user=person.user)

    async def both() -> tuple[Task, str]:
        async with orbit_client(credential) as orbit:
            task = await orbit.get_task(task_id)
            attempts = await orbit.list_attempts(task_id, limit=1)
        return task, error_code(attempts.items[0].error) if attempts.items else ""

    return async_to_sync(both)()


def decided_on(task: Task, code: str, started_at: datetime) -> DecidedOn:
    return DecidedOn(
        handler=task.handler,
        last_error_code=code,
        waiting_since=waiting_since(task),
        started_at=started_at,
    )


def body(**fields: Any) -> str:
    return json.dumps(fields, indent=2)


def assert_rollups_match(*namespace_ids: str) -> None:
    """Every rollup row of these namespaces is what the facts make it, and nothing else."""
    assert tallies.stored(namespace_ids) == tallies.recompute(namespace_ids)
