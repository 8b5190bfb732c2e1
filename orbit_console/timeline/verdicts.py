"""Who may watch which task's timeline: asked of the recovery API once per credential and task,
however many sockets watch it.

Every timeline socket must stay authorised: the API is asked, with the person's own
credential, whether it may read the task's operations, on connect and again every
``TIMELINE_RECHECK_SECONDS``, and a push never goes out on an answer older than twice that. A
person with ten tabs on one task, or a wall screen shared by a team, used to cost one API call
per socket per period; here the sockets of one credential on one task share one answer, and
while one of them is asking the others wait for that same answer (one call in flight per key).
The cost grows with the people and tasks being watched, not with the sockets (issue 12).

Only allowed answers are shared (``console.access.Verdicts``). A refusal closes the socket that
met it; the others of the key meet it at their own next check, never later than the staleness
bound above. When the API does not answer, the last answer stands until it is too old to
trust, as before.
"""

from orbit_console.client import OrbitClient
from orbit_console.people.access import Verdicts


async def _list_operations(orbit: OrbitClient, task_id: str) -> object:
    return await orbit.list_task_operations(task_id, limit=1)


VERDICTS = Verdicts(probe=_list_operations)
