"""Which recoveries a person may start on a task now, and why the others are unavailable.

This only decides what the console offers and explains; the recovery API checks everything
again (RV1, RV2, RT1, RT6) and has the last word.
"""

from dataclasses import dataclass, field

from django.utils.formats import date_format
from django.utils.translation import gettext as _

from orbit_console.client import Task
from orbit_console.console.people import Person


@dataclass
class Availability:
    action: str
    reasons: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.reasons


def _execution_reasons(task: Task) -> list[str]:
    reasons = []
    if task.leased:
        until = (
            _(" (until %(time)s UTC)") % {"time": date_format(task.lease_expires_at, "Y-m-d H:i:s")}
            if task.lease_expires_at
            else ""
        )
        reasons.append(_("A worker still holds the task's lease%(until)s.") % {"until": until})
    if task.active_attempt:
        reasons.append(_("An attempt is still running."))
    if task.unreleased_permit:
        reasons.append(_("The task still holds an unreleased permit."))
    return reasons


def review_availability(task: Task, person: Person) -> Availability:
    """RV1, RV2."""
    availability = Availability("review")
    reasons = availability.reasons
    if not person.can("tasks:review"):
        reasons.append(_("Your Orbit credential does not hold the tasks:review permission."))
    if task.state != "NEEDS_REVIEW":
        reasons.append(
            _("Only a task in NEEDS_REVIEW can be reviewed; this one is %(state)s.")
            % {"state": task.state}
        )
    if task.owner_kind == "WORKFLOW":
        reasons.append(_("The task belongs to a workflow; its controller must recover it."))
    if task.gated:
        reasons.append(_("The task is held by a gate; its controller must recover it."))
    if task.state == "NEEDS_REVIEW":
        reasons.extend(_execution_reasons(task))
    return availability


def retry_availability(task: Task, person: Person) -> Availability:
    """RT1, RT6."""
    availability = Availability("retry")
    reasons = availability.reasons
    if not person.can("tasks:retry"):
        reasons.append(_("Your Orbit credential does not hold the tasks:retry permission."))
    if task.state == "NEEDS_REVIEW":
        reasons.append(_("The task is in NEEDS_REVIEW: review it first."))
    elif task.state == "SUCCEEDED":
        reasons.append(_("A SUCCEEDED task can never be retried."))
    elif task.state not in ("FAILED", "CANCELLED"):
        reasons.append(
            _("Only FAILED or CANCELLED tasks can be retried; this one is %(state)s.")
            % {"state": task.state}
        )
    if task.owner_kind == "WORKFLOW":
        reasons.append(_("The task belongs to a workflow; only standalone tasks can be retried."))
    elif task.owner_kind == "PLAN":
        reasons.append(_("The task belongs to a plan; only standalone tasks can be retried."))
    if task.gated:
        reasons.append(_("The task is held by a gate; only standalone tasks can be retried."))
    if task.effect_uncertain and task.state in ("FAILED", "CANCELLED"):
        reasons.append(_("The effect of the earlier execution is uncertain."))
    if task.retry_successor_id:
        reasons.append(_("The task already has a retry successor; act on that task instead."))
    if task.state in ("FAILED", "CANCELLED"):
        reasons.extend(_execution_reasons(task))
    return availability
