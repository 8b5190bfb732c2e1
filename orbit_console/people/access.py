"""The one rule of what a person may see and act on: a task, and everything the console keeps
about it (its proposals, submissions, console events, timeline fragments and sockets), only
while one of the person's own Orbit credentials can read that task (a person holds at most one
per namespace), and then with that credential.

The recovery API decides, with the person's credential: the console never guesses from its own
records (a credential's namespace and queues are the API's to judge, and they change). Its
allowed answers are kept briefly (``CONSOLE_ACCESS_SECONDS``) per credential and task and
shared by every request and socket that asks meanwhile, with one call in flight per key, so
that a busy page costs one API call per person and task, not one per request (issue 12). A
refusal is never kept: the next request asks again.

Views call ``require_task_access`` once they know the task behind what was asked for; the
authorisation matrix test (``tests/console/test_authorisation_matrix.py``) proves that every
URL of the console does.
"""

import asyncio
import dataclasses
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from django.conf import settings
from django.http import Http404

from orbit_console.client import OrbitClient, OrbitError, OutcomeUnknown, Task
from orbit_console.people.models import OrbitCredential
from orbit_console.people.person import Person, orbit_client

type Key = tuple[int, str, str]
type Probe = Callable[[OrbitClient, str], Awaitable[object]]


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    at: float  # time.monotonic() of the API's answer
    # Set when the API did not answer this time: the verdict is the last one known.
    unanswered: OutcomeUnknown | None = None
    # What the API answered, for the caller whose check asked it just now (never kept).
    answer: object = None

    def fresh(self, max_age: float) -> bool:
        return self.allowed and time.monotonic() - self.at < max_age


REFUSED = Verdict(allowed=False, at=0.0)


class Verdicts:
    """The API's answers to one question about (credential, task), shared while fresh.

    ``probe`` asks the question: it returns when the API allows, raises ``OrbitError`` when it
    refuses. When the API does not answer (``OutcomeUnknown``), the last answer stands; the
    caller's ``max_age`` bounds how old an answer it accepts.
    """

    def __init__(self, probe: Probe) -> None:
        self._probe = probe
        self._known: dict[Key, Verdict] = {}
        self._asking: dict[Key, asyncio.Future[Verdict]] = {}

    def known(self, credential: OrbitCredential, task_id: str) -> Verdict:
        return self._known.get(_key(credential, task_id), REFUSED)

    async def check(self, credential: OrbitCredential, task_id: str, *, max_age: float) -> Verdict:
        """An allowed answer younger than ``max_age``, else the API's answer now."""
        key = _key(credential, task_id)
        known = self._known.get(key, REFUSED)
        if known.fresh(max_age):
            return known
        if (asking := self._asking.get(key)) is not None:
            return await asyncio.shield(asking)
        asking = self._asking[key] = asyncio.get_running_loop().create_future()
        try:
            verdict = await self._ask(credential, task_id, known)
        except BaseException:
            asking.set_result(known)  # the waiting callers keep what was known
            raise
        finally:
            del self._asking[key]
        asking.set_result(verdict)
        self._remember(key, dataclasses.replace(verdict, answer=None), max_age)
        return verdict

    async def _ask(self, credential: OrbitCredential, task_id: str, known: Verdict) -> Verdict:
        try:
            async with orbit_client(credential) as orbit:
                answer = await self._probe(orbit, task_id)
        except OrbitError:
            return REFUSED
        except OutcomeUnknown as unknown:
            # No answer: the last one stands until it is too old.
            return dataclasses.replace(known, unanswered=unknown)
        return Verdict(allowed=True, at=time.monotonic(), answer=answer)

    def _remember(self, key: Key, verdict: Verdict, max_age: float) -> None:
        if verdict.allowed:
            self._known[key] = verdict
        else:
            self._known.pop(key, None)
        # Forget what no caller could still use (past the staleness bound of every caller).
        if len(self._known) > 1024:
            horizon = time.monotonic() - 4 * max_age
            for stale in [k for k, v in self._known.items() if v.at < horizon]:
                del self._known[stale]


def _key(credential: OrbitCredential, task_id: str) -> Key:
    # A new token (re-enrolment) is a new key: answers given to the old one are not reused.
    token = hashlib.sha256(credential.token_ciphertext.encode()).hexdigest()
    return (credential.pk, token, task_id)


async def _get_task(orbit: OrbitClient, task_id: str) -> object:
    return await orbit.get_task(task_id)


TASK_READ = Verdicts(probe=_get_task)


async def task_credential(person: Person, task_id: str) -> OrbitCredential | None:
    """The person's credential that can read the task (GetTask), as the API answered within
    ``CONSOLE_ACCESS_SECONDS``; ``None`` when none can (or the person holds none). A credential
    already known to read it is used without asking; otherwise every credential is asked at
    once. Raises ``OutcomeUnknown`` when the API does not answer and no recent answer allows:
    the console fails closed, and says the API is unavailable rather than "not found"."""
    credential, _ = await _task_reader(person, task_id)
    return credential


async def _task_reader(person: Person, task_id: str) -> tuple[OrbitCredential | None, Task | None]:
    """``task_credential``, and the task when the check read it from the API just now."""
    max_age = settings.CONSOLE_ACCESS_SECONDS
    for credential in person.credentials:
        if TASK_READ.known(credential, task_id).fresh(max_age):
            return credential, None
    verdicts = await asyncio.gather(
        *(TASK_READ.check(c, task_id, max_age=max_age) for c in person.credentials)
    )
    unanswered = None
    for credential, verdict in zip(person.credentials, verdicts, strict=True):
        if verdict.fresh(max_age):
            return credential, verdict.answer if isinstance(verdict.answer, Task) else None
        unanswered = unanswered or verdict.unanswered
    if unanswered is not None:
        raise unanswered
    return None, None


async def can_read_task(person: Person, task_id: str) -> bool:
    """Whether one of the person's credentials can read the task (``task_credential``)."""
    return await task_credential(person, task_id) is not None


async def require_task_access(
    person: Person, task_id: str, *, what: str = "task"
) -> OrbitCredential:
    """The credential to act on the task with; 404 — the same answer as for something that does
    not exist (C4) — unless the person may see the task. ``what`` names the thing asked for in
    the 404."""
    credential, _ = await require_task_read(person, task_id, what=what)
    return credential


async def require_task_read(
    person: Person, task_id: str, *, what: str = "task"
) -> tuple[OrbitCredential, Task | None]:
    """``require_task_access``, and the task as the API answered the check when the check
    asked it just now (``None`` when a recent answer sufficed): a page that shows the task
    as it is now need not read it twice."""
    credential, read = await _task_reader(person, task_id)
    if credential is None:
        raise Http404(f"no such {what}")
    return credential, read
