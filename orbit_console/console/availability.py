"""Which recoveries a person may start on a task now, and why the others are unavailable.

This only decides what the console offers and explains; the recovery API checks everything
again (RV1, RV2, RT1, RT6) and has the last word.
"""

from dataclasses import dataclass, field

from django.conf import settings
from django.utils.formats import date_format
from django.utils.translation import gettext as _

from orbit_console.client import Task
from orbit_console.people.person import OPERATOR, SUPERVISOR, Person

DIRECT = "direct"
PROPOSE = "propose"


def recovery_mode(person: Person, action: str) -> str | None:
    """How this person may start a review or retry: ``propose`` it for a supervisor's approval
    (when the policy requires one), send it ``direct`` (when it does not and their credential
    holds the permission), or not at all (``None``)."""
    if settings.CONSOLE_APPROVAL_POLICY[action]["required"]:
        return PROPOSE if person.roles & {OPERATOR, SUPERVISOR} else None
    if person.read_only or not person.can(f"tasks:{action}"):
        return None
    return DIRECT


@dataclass
class Availability:
    action: str
    mode: str | None = None
    reasons: list[str] = field(default_factory=list)

    @property
    def allowed(self) -> bool:
        return not self.reasons


def _mode_reasons(availability: Availability, person: Person) -> None:
    availability.mode = recovery_mode(person, availability.action)
    if availability.mode is not None:
        return
    if settings.CONSOLE_APPROVAL_POLICY[availability.action]["required"]:
        availability.reasons.append(_("Only operators and supervisors can propose recoveries."))
    else:
        availability.reasons.append(
            _("Your Orbit credential does not hold the tasks:%(action)s permission.")
            % {"action": availability.action}
        )


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
    _mode_reasons(availability, person)
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
    _mode_reasons(availability, person)
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
