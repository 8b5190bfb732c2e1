"""Following every decision to its end (I2: a receipt means "stored", not "done"), on the
console's pages over real HTTP and WebSockets: the submission page, the task page, the
person's own decisions (``/decisions``, live over ``/ws/decisions``), and the console's record.
Here no event stream is consumed: each page reads the followed task again when shown (the
stream's part is tests/feed/test_feed_processes.py)."""

import asyncio
import contextlib
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from websockets.asyncio.client import connect
from websockets.typing import Origin

from orbit_console.decisions.models import ConsoleEvent, FollowUp, Submission
from orbit_console.ledger import lifecycle
from orbit_console.ledger.models import AttemptOutcome, Task
from tests.console.web import (
    Console,
    retry_values,
    review_through_console,
    signed_in,
    submission_id_of,
    text_of,
    wizard_submit,
    wizard_to_confirm,
)
from tests.support.people import TestPerson, make_person
from tests.support.servers import DaphneServer
from tests.timeline.helpers import session_cookie

WAIT = 30.0


def retry(console: Console, task_id: str) -> Submission:
    confirm = wizard_to_confirm(console, task_id, "retry", retry_values())
    submission_id = submission_id_of(wizard_submit(console, task_id, "retry", confirm.text))
    return Submission.objects.get(id=submission_id)


def run_once(task_id: str, outcome: str) -> None:
    """A worker runs the task once (revisions 2 and 3)."""
    task = Task.objects.get(id=task_id)
    worker = lifecycle.actor_id_for(task.namespace_id, "worker-1")
    lifecycle.attempt_start(task=task, worker_id="worker-1")
    lifecycle.attempt_finish(task=task, worker_actor_id=worker, outcome=outcome, result="{}")


@pytest.fixture
def supervisor(people: dict[str, TestPerson]) -> TestPerson:
    return people["supervisor"]


def test_a_retry_is_followed_to_its_end_on_its_pages_I2(
    orbit_server: DaphneServer, world: dict[str, Any], supervisor: TestPerson
) -> None:
    source = world["tasks"]["failed"]
    with signed_in(orbit_server.url, supervisor) as console:
        submission = retry(console, source)
        successor = submission.result_task_id
        followup = FollowUp.objects.get(submission=submission)
        assert (followup.task_id, followup.state, followup.revision) == (successor, "WAITING", 1)

        page = text_of(console.get(f"/submissions/{submission.id}").text)
        assert (
            f"The new task {successor[:8]} is WAITING at revision 1: followed until it ends" in page
        )
        mine = text_of(console.get("/decisions").text)
        assert f"the new task {successor[:8]} is WAITING, followed until it ends" in mine

        run_once(successor, AttemptOutcome.FAILED)
        page = text_of(console.get(f"/submissions/{submission.id}").text)
        assert f"The new task {successor[:8]} ended FAILED at revision 3" in page
        task_page = text_of(console.get(f"/tasks/{source}").text)
        assert (
            f"This task was retried as {successor} . That task is FAILED at revision 3" in task_page
        )
        assert f"the new task {successor[:8]} ended FAILED" in task_page
        mine = text_of(console.get("/decisions").text)
        assert f"the new task {successor[:8]} ended FAILED" in mine

    followup = FollowUp.objects.get(submission=submission)
    assert followup.ended and (followup.state, followup.revision) == ("FAILED", 3)
    # The console's record says so once, on the decision's task, however often it is read.
    recorded = ConsoleEvent.objects.filter(submission=submission, kind="submission.followed")
    assert [(event.task_id, event.note) for event in recorded] == [
        (source, f"task {successor} is FAILED at revision 3")
    ]


def test_a_review_ends_what_it_follows_at_once(
    orbit_server: DaphneServer, world: dict[str, Any], supervisor: TestPerson
) -> None:
    with signed_in(orbit_server.url, supervisor) as console:
        submission_id, page = review_through_console(console, world["tasks"]["needs_review"])
    followup = FollowUp.objects.get(submission_id=submission_id)
    assert followup.ended and (followup.state, followup.revision) == ("FAILED", 4)
    assert "The task is FAILED at revision 4: the review ended it." in text_of(page.text)
    assert not ConsoleEvent.objects.filter(
        submission_id=submission_id, kind="submission.followed"
    ).exists()  # ended with its receipt, which the record has


def test_following_stops_at_its_deadline(
    orbit_server: DaphneServer, world: dict[str, Any], supervisor: TestPerson
) -> None:
    with signed_in(orbit_server.url, supervisor) as console:
        submission = retry(console, world["tasks"]["cancelled"])
        FollowUp.objects.filter(submission=submission).update(
            deadline=timezone.now() - timedelta(seconds=1)
        )
        run_once(submission.result_task_id, AttemptOutcome.SUCCEEDED)
        page = text_of(console.get(f"/submissions/{submission.id}").text)
    assert "No longer followed since" in page
    assert "Read just now: SUCCEEDED at revision 3." in page  # the page still reads it
    assert FollowUp.objects.get(submission=submission).state == "WAITING"


def test_a_persons_decisions_are_theirs_and_move_live(
    orbit_server: DaphneServer, world: dict[str, Any], supervisor: TestPerson
) -> None:
    """``/ws/decisions`` pushes the row of a decision whose follow-up moved, whole, to the
    person who made it and to no one else."""
    other = make_person(world, "supervisor")
    with signed_in(orbit_server.url, supervisor) as console:
        submission = retry(console, world["tasks"]["failed"])
    successor = submission.result_task_id
    with signed_in(orbit_server.url, other) as someone_else:
        assert f"decision-{submission.id}" not in someone_else.get("/decisions").text

    async def scenario() -> tuple[list[str], list[str]]:
        url = orbit_server.url.replace("http://", "ws://", 1) + "/ws/decisions"

        async def listen(user: Any) -> Any:
            cookie = f"sessionid={await asyncio.to_thread(session_cookie, user)}"
            return await connect(
                url, origin=Origin(orbit_server.url), additional_headers={"Cookie": cookie}
            )

        mine, theirs = await listen(supervisor.user), await listen(other.user)
        try:
            await asyncio.to_thread(run_once, successor, AttemptOutcome.SUCCEEDED)
            # What moves the follow-up in the server: a page that reads the task again.
            with signed_in(orbit_server.url, supervisor) as console:
                await asyncio.to_thread(console.get, f"/submissions/{submission.id}")
            pushed = [await asyncio.wait_for(mine.recv(), WAIT)]
            heard: list[str] = []
            with contextlib.suppress(TimeoutError):
                heard.append(str(await asyncio.wait_for(theirs.recv(), 1.0)))
            return [str(text) for text in pushed], heard
        finally:
            await mine.close()
            await theirs.close()

    pushed, heard = asyncio.run(scenario())
    (row,) = pushed
    assert f'id="decision-{submission.id}"' in row and 'hx-swap-oob="true"' in row
    assert "ended SUCCEEDED" in text_of(row)
    assert heard == []
