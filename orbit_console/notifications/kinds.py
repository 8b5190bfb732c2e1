"""The kinds of notification, their titles in every language, and who may turn email off."""

from django.utils.translation import gettext_lazy as _

KINDS = {
    "proposal.waiting": _("A proposal waits for your approval"),
    "proposal.reminder": _("A proposal waiting for approval expires soon"),
    "proposal.approved": _("Your proposal was approved"),
    "proposal.rejected": _("Your proposal was rejected"),
    "proposal.expired": _("Your proposal expired without being approved"),
    "batch.waiting": _("A batch waits for your approval"),
    "batch.reminder": _("A batch waiting for approval expires soon"),
    "batch.approved": _("Your batch was approved"),
    "batch.rejected": _("Your batch was rejected"),
    "batch.expired": _("Your batch expired without being approved"),
    "batch.finished": _("A batch finished"),
    "submission.unknown": _("A decision's outcome is still unknown"),
    "objective.breached": _("A task waits past its objective"),
    "decisions.stalled": _("Tasks wait and no decision has been made"),
    "audit.verify_failed": _("Audit verification found a break"),
    "audit.checkpoint_overdue": _("The audit checkpoint is overdue"),
}


def title(kind: str) -> str:
    return str(KINDS.get(kind, kind))
