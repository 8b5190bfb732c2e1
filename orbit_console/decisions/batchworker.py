"""The batch worker: sends the stored submissions of running batches (docs/bulk.md).

Runs where the console's sockets can hear it (``run_batches``): in the reconciler's process
(``manage.py reconcile``) when the processes share a channel layer (Redis, as deployed); in the
server's own process when the layer is the in-memory one (the embedded default, the demo), since
pushes from another process would reach no socket there. Exactly once per
task comes from the submissions: each was stored with its own idempotency key and pinned
revision before anything was sent, so a send repeated after a crash is the identical request
and the API answers it with the first receipt (C7, C9).

- **Claims.** Before sending an item the worker moves its next attempt
  ``CONSOLE_BATCH_CLAIM_SECONDS`` ahead with a conditional update: a second worker, or the next
  round of this one, does not send it meanwhile. A worker killed mid-send leaves the claim to
  run out; the item is then sent again, identically.
- **Bounded.** At most ``CONSOLE_BATCH_CONCURRENCY`` sends at once, started no faster than
  ``CONSOLE_BATCH_RATE`` per second.
- **Backpressure.** A 429 (``QUEUE_FULL``, ``APPLICATION_FULL``) holds the whole batch for the
  API's ``retry_after_ms`` (RT7); the item itself is due again then.
- **Never re-pinned.** A 409 ``STATE_CONFLICT`` on a task whose revision moved since it was
  selected ends the item as "changed since selected" (I6); it is never sent with a new revision.
- **Paused, cancelled.** A paused batch sends nothing; a cancelled one only follows what was
  already sent to its answer.
- **Starting.** A batch whose start was cut short (the process that stored its submissions
  died) is still ``starting``: the worker stores the rest, chunk by chunk, and sends it once
  every submission is stored.
- **Failing.** A batch whose rounds fail is left alone for a growing pause (``Backoff``).
"""

import asyncio
import logging
import time
from collections.abc import Callable
from datetime import timedelta

from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import close_old_connections, transaction
from django.db.models import Q
from django.utils import timezone

from orbit_console.client import OrbitError, OutcomeUnknown
from orbit_console.decisions.batches import (
    batch_store_next,
    finish_if_done,
    publish_progress,
    settle,
)
from orbit_console.decisions.models import (
    OPEN_STATES,
    Batch,
    BatchItem,
    BatchState,
    Submission,
    SubmissionState,
)
from orbit_console.decisions.submissions import sending_credential, submission_send
from orbit_console.ops.workers import shares_channel_layer
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import orbit_client

logger = logging.getLogger("orbit.console.batches")

# A round takes at most this many items of one batch; the worker comes back for more.
ROUND = 200
# Progress is announced at most this often per batch while items land (and always at the end).
PROGRESS_EVERY = 0.25
# After failed rounds the worker waits longer each time, never more than this.
MAX_BACKOFF = 30.0


def sends_here(process: str) -> bool:
    """Whether a process of this kind (``"server"``, ``"reconciler"``) runs the batch worker:
    ``CONSOLE_BATCH_WORKER``, where ``auto`` is the server with the in-memory channel layer (the
    only process whose sockets its pushes reach) and the reconciler with a shared one."""
    where = settings.CONSOLE_BATCH_WORKER
    if where == "auto":
        where = "reconciler" if shares_channel_layer() else "server"
    return bool(where == process)


class _Pace:
    """Starts no more than ``rate`` sends per second."""

    def __init__(self, rate: float) -> None:
        self.interval = 1 / rate if rate > 0 else 0.0
        self.next = time.monotonic()
        self.lock = asyncio.Lock()

    async def wait(self) -> None:
        async with self.lock:
            now = time.monotonic()
            if self.next > now:
                await asyncio.sleep(self.next - now)
            self.next = max(now, self.next) + self.interval


def _sending_batches(now: object) -> list[Batch]:
    hold = Q(hold_until__isnull=True) | Q(hold_until__lte=now)
    return list(
        Batch.objects.filter(
            hold, state__in=[BatchState.STARTING, BatchState.RUNNING, BatchState.CANCELLED]
        )
        .filter(finished_at__isnull=True)
        .order_by("started_at")
    )


def _due_items(batch: Batch, now: object) -> list[BatchItem]:
    due = BatchItem.objects.filter(
        batch=batch,
        submission__state__in=OPEN_STATES,
        submission__next_attempt_at__lte=now,
        submission__reconcile_deadline__gt=now,
    )
    if batch.state == BatchState.CANCELLED:
        due = due.filter(submission__send_count__gt=0)
    return list(due.select_related("submission").order_by("id")[:ROUND])


def _claim(submission_id: str, now: object) -> bool:
    until = timezone.now() + timedelta(seconds=settings.CONSOLE_BATCH_CLAIM_SECONDS)
    claimed = Submission.objects.filter(
        id=submission_id, state__in=OPEN_STATES, next_attempt_at__lte=now
    ).update(next_attempt_at=until)
    return claimed == 1


def _still_sending(batch_id: str) -> bool:
    return Batch.objects.filter(id=batch_id, state=BatchState.RUNNING).exists()


def _hold(batch_id: str, until: object) -> None:
    Batch.objects.filter(id=batch_id).update(hold_until=until)


def _settle(item_id: int, submission: Submission, revision_moved: bool) -> None:
    with transaction.atomic():
        item = BatchItem.objects.select_for_update().get(id=item_id)
        if item.outcome:
            return
        if settle(item, submission, revision_moved=revision_moved):
            finish_if_done(Batch.objects.get(id=item.batch_id), timezone.now())


def _finish(batch_id: str) -> None:
    """Settle the items whose submission ended without the worker (closed, or past its
    reconcile deadline), and finish the batch when none is left."""
    with transaction.atomic():
        batch = Batch.objects.select_for_update().get(id=batch_id)
        ended = (
            Q(submission__isnull=True)
            | Q(submission__next_attempt_at__isnull=True)
            | ~Q(submission__state__in=OPEN_STATES)
        )
        for item in batch.items.filter(ended, outcome="").select_related("submission"):
            settle(item, item.submission, revision_moved=False)
        finish_if_done(batch, timezone.now())
        publish_progress(batch_id)


async def _revision_moved(submission: Submission) -> bool:
    """After a 409: has the task moved past the revision the batch pinned? Read with the
    sender's credential; when the API cannot tell, the item is a plain refusal."""
    held = [c async for c in OrbitCredential.objects.filter(user_id=submission.sent_as_id)]
    credential = sending_credential(submission, held)
    if credential is None:
        return False
    try:
        async with orbit_client(credential) as orbit:
            task = await orbit.get_task(submission.task_id)
    except OrbitError as error:
        return error.status == 404
    except OutcomeUnknown:
        return False
    return task.revision != submission.expected_revision


async def work_batch(batch: Batch) -> int:
    """One round of one batch: send its due items, bounded. Returns how many were sent."""
    now = timezone.now()
    items = await sync_to_async(_due_items)(batch, now)
    if not items:
        await sync_to_async(_finish)(batch.id)
        return 0
    gate = asyncio.Semaphore(settings.CONSOLE_BATCH_CONCURRENCY)
    pace = _Pace(settings.CONSOLE_BATCH_RATE)
    held = asyncio.Event()
    announced = [0.0]
    sent = 0

    async def send(item: BatchItem) -> None:
        nonlocal sent
        async with gate:
            if held.is_set():
                return
            await pace.wait()
            if batch.state == BatchState.RUNNING and not await sync_to_async(_still_sending)(
                batch.id
            ):
                held.set()  # paused or cancelled meanwhile: its unsent items stay unsent
                return
            if not await sync_to_async(_claim)(str(item.submission_id), now):
                return
            submission = await submission_send(item.submission, actor=None)  # type: ignore[arg-type]
            sent += 1
            if submission.state == SubmissionState.RETRY_LATER:
                held.set()
                await sync_to_async(_hold)(batch.id, submission.next_attempt_at)
                return
            moved = (
                submission.state == SubmissionState.REJECTED
                and submission.error_code == "STATE_CONFLICT"
                and await _revision_moved(submission)
            )
            await sync_to_async(_settle)(item.id, submission, moved)
            if time.monotonic() - announced[0] >= PROGRESS_EVERY:
                announced[0] = time.monotonic()
                await sync_to_async(publish_progress)(batch.id)

    await asyncio.gather(*(send(item) for item in items))
    await sync_to_async(publish_progress)(batch.id)
    return sent


class Backoff:
    """Per batch: after a failed round the batch is left alone for a pause that doubles with
    each failure in a row (1 s, 2 s, ... at most ``MAX_BACKOFF``), while the other batches go
    on. A batch whose rounds keep failing costs one round per pause, and its traceback is
    logged once, at the first failure: the later ones are one line each."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self.failures: dict[str, int] = {}
        self.until: dict[str, float] = {}

    def due(self, batch_id: str) -> bool:
        return self.until.get(batch_id, 0.0) <= self.clock()

    def failed(self, batch_id: str) -> float:
        """Count a failed round; the pause before the next one, in seconds."""
        failures = self.failures[batch_id] = self.failures.get(batch_id, 0) + 1
        pause = min(0.5 * 2**failures, MAX_BACKOFF)
        self.until[batch_id] = self.clock() + pause
        return pause

    def succeeded(self, batch_id: str) -> None:
        self.failures.pop(batch_id, None)
        self.until.pop(batch_id, None)


async def _started(batch: Batch) -> Batch:
    """A batch left ``starting`` (its start was cut short, or is still under way elsewhere):
    its remaining submissions stored, a chunk per hop to the database thread."""
    while await sync_to_async(batch_store_next)(batch_id=batch.id):
        pass
    return await Batch.objects.aget(id=batch.id)


async def work_batches(backoff: Backoff | None = None) -> int:
    """One round over every sending batch (but those ``backoff`` still holds after failed
    rounds), starting those left starting first. Returns how many items were sent."""
    backoff = backoff or Backoff()
    sent = 0
    for batch in await sync_to_async(_sending_batches)(timezone.now()):
        if not backoff.due(batch.id):
            continue
        try:
            if batch.state == BatchState.STARTING:
                batch = await _started(batch)
            sent += await work_batch(batch)
        except Exception as error:
            pause = backoff.failed(batch.id)
            if backoff.failures[batch.id] == 1:
                logger.exception("batch %s: a round failed; next try in %.0f s", batch.id, pause)
            else:
                logger.error(
                    "batch %s: a round failed again (%d in a row: %s); next try in %.0f s",
                    batch.id,
                    backoff.failures[batch.id],
                    type(error).__name__,
                    pause,
                )
        else:
            backoff.succeeded(batch.id)
    return sent


async def run_batches(stop: asyncio.Event) -> None:
    """Send batches' items until ``stop``: at once again while some were due, else look every
    half second; a failed round (the database away) waits longer each time, and is logged. A
    batch whose own rounds fail waits on its own (``Backoff``)."""
    failures = 0
    backoff = Backoff()
    while not stop.is_set():
        try:
            sent = await work_batches(backoff)
        except Exception:
            failures += 1
            logger.exception("batch worker: a round failed")
            pause = min(0.5 * 2**failures, MAX_BACKOFF)
        else:
            failures, pause = 0, (0.0 if sent else 0.5)
            # As at the end of a request: a failed or retiring connection is closed.
            await sync_to_async(close_old_connections)()
        try:
            await asyncio.wait_for(stop.wait(), timeout=pause)
        except TimeoutError:
            continue
