"""Who may watch which task's timeline: asked of the recovery API once per credential and task,
however many sockets watch it.

Every timeline socket must stay authorised: the API is asked, with the person's own
credential, whether it may read the task's operations, on connect and again every
``TIMELINE_RECHECK_SECONDS``, and a push never goes out on an answer older than twice that. A
person with ten tabs on one task, or a wall screen shared by a team, used to cost one API call
per socket per period; here the sockets of one credential on one task share one answer, and
while one of them is asking the others wait for that same answer (one call in flight per key).
The cost grows with the people and tasks being watched, not with the sockets (issue 12).

Only allowed answers are shared. A refusal closes the socket that met it; the others of the key
meet it at their own next check, never later than the staleness bound above. When the API does
not answer, the last answer stands until it is too old to trust, as before.
"""

import asyncio
import hashlib
import time
from dataclasses import dataclass

from orbit_console.client import OrbitError, OutcomeUnknown
from orbit_console.console.models import OrbitCredential
from orbit_console.console.people import orbit_client

type Key = tuple[int, str, str]


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    at: float  # time.monotonic() of the API's answer

    def fresh(self, max_age: float) -> bool:
        return self.allowed and time.monotonic() - self.at < max_age


REFUSED = Verdict(allowed=False, at=0.0)


class Verdicts:
    def __init__(self) -> None:
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
            asking.set_result(known)  # the waiting sockets keep what was known
            raise
        finally:
            del self._asking[key]
        asking.set_result(verdict)
        self._remember(key, verdict, max_age)
        return verdict

    async def _ask(self, credential: OrbitCredential, task_id: str, known: Verdict) -> Verdict:
        try:
            async with orbit_client(credential) as orbit:
                await orbit.list_task_operations(task_id, limit=1)
        except OrbitError:
            return REFUSED
        except OutcomeUnknown:
            return known  # no answer: the last one stands until it is too old
        return Verdict(allowed=True, at=time.monotonic())

    def _remember(self, key: Key, verdict: Verdict, max_age: float) -> None:
        if verdict.allowed:
            self._known[key] = verdict
        else:
            self._known.pop(key, None)
        # Forget what no socket could still use (past the staleness bound of every caller).
        if len(self._known) > 1024:
            horizon = time.monotonic() - 4 * max_age
            for stale in [k for k, v in self._known.items() if v.at < horizon]:
                del self._known[stale]


def _key(credential: OrbitCredential, task_id: str) -> Key:
    # A new token (re-enrolment) is a new key: answers given to the old one are not reused.
    token = hashlib.sha256(credential.token_ciphertext.encode()).hexdigest()
    return (credential.pk, token, task_id)


VERDICTS = Verdicts()
