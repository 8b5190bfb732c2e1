"""Four eyes: a decision proposed by one person is sent only after a different supervisor
approves it (docs/approvals.md).

Every change of a proposal happens under its row lock, so that two supervisors approving at the
same moment produce one submission: the first completes the approval, the second finds the
proposal decided and is told by whom. Every step is an append-only console event.
"""

from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.translation import gettext as _

from orbit_console.decisions.models import Approval, Proposal, ProposalState, Submission
from orbit_console.decisions.submissions import (
    Authenticated,
    DecidedOn,
    credential_namespace,
    decision_slot,
    record_event,
    submission_create,
)
from orbit_console.lib import notes
from orbit_console.lib.ids import new_id
from orbit_console.lib.live import publish_on_commit
from orbit_console.people.accounts import accounts_of, shown_name
from orbit_console.people.person import SUPERVISOR, Person

APPROVALS_GROUP = "console.approvals"
APPROVALS_MESSAGE = "approvals.changed"


class ProposalRefused(Exception):
    """The step is not allowed; the message says why, in words for the person."""


def refuse_own(*, author_id: int, decider: User, verb: str) -> frozenset[int]:
    """Four eyes, per person (docs/approvals.md): nobody decides what they proposed, from this
    account or any other account of theirs (``people/accounts.py``). ``verb`` is "approve" or
    "reject"; returns the decider's accounts (for "already approved", also per person)."""
    mine = accounts_of(decider.pk)
    if author_id == decider.pk:
        if verb == "reject":
            raise ProposalRefused(_("Nobody rejects their own proposal: withdraw it instead."))
        raise ProposalRefused(_("Nobody approves their own proposal."))
    if author_id in mine:
        author = User.objects.filter(pk=author_id).values_list("username", flat=True).first()
        raise ProposalRefused(
            _(
                "Nobody decides their own proposal: it was made by %(name)s, another account "
                "of yours. Another supervisor decides it."
            )
            % {"name": author or "?"}
        )
    return mine


def visible_proposals(person: Person) -> QuerySet[Proposal]:
    """Proposals a supervisor is shown: those of the namespaces of their credentials, and those
    whose namespace the console does not know. Pages and pushes then keep only those whose task
    one of the supervisor's credentials can read (console/access.py)."""
    return Proposal.objects.filter(namespace_id__in=[*person.namespaces, ""])


def approval_required(action: str) -> bool:
    return bool(settings.CONSOLE_APPROVAL_POLICY[action]["required"])


@dataclass(frozen=True)
class Proposed:
    proposal: Proposal
    created: bool  # False: this decision had already been proposed (double click, two tabs)


def proposal_create(
    *,
    action: str,
    task_id: str,
    expected_revision: str,
    body: str,
    proposed_by: User,
    queue_id: str = "",
    namespace_id: str | None = None,
    handler: str = "",
    decided_on: DecidedOn | None = None,
) -> Proposed:
    """Store a proposal: request body, pinned revision and idempotency key, fixed from now on.
    One live proposal per task revision: a second one returns the first (``created=False``).
    ``namespace_id`` is the task's; by default the namespace of the proposer's credential.
    ``decided_on``: what it was made on (its handler, when ``handler`` is not given)."""
    if namespace_id is None:
        namespace_id = credential_namespace(proposed_by)
    seen = decided_on or DecidedOn()
    fields = {
        "action": action,
        "task_id": task_id,
        "queue_id": queue_id,
        "namespace_id": namespace_id,
        "handler": handler or seen.handler,
        "last_error_code": seen.last_error_code,
        "waiting_since": seen.waiting_since,
        "started_at": seen.started_at,
        "expected_revision": expected_revision,
        "body": body,
        "proposed_by": proposed_by,
    }
    slot = decision_slot(task_id, expected_revision)
    try:
        return Proposed(_insert(slot, **fields), created=True)
    except IntegrityError:
        pass
    with transaction.atomic():
        holder = Proposal.objects.select_for_update().filter(decision_slot=slot).first()
        if holder is not None and not _expire_if_due(holder, timezone.now()):
            return Proposed(holder, created=False)
    return Proposed(_insert(slot, **fields), created=True)  # the slot was freed meanwhile


def _insert(slot: str, **fields: object) -> Proposal:
    now = timezone.now()
    proposal_id = new_id()
    action = str(fields["action"])
    with transaction.atomic():
        proposal = Proposal.objects.create(
            id=proposal_id,
            idempotency_key=f"orbit-console-{proposal_id}",
            required_approvals=settings.CONSOLE_APPROVAL_POLICY[action]["approvers"],
            created_at=now,
            expires_at=now + timedelta(hours=settings.CONSOLE_PROPOSAL_TTL_HOURS),
            decision_slot=slot,
            **fields,
        )
        record_event("proposal.proposed", proposal=proposal, actor=proposal.proposed_by, now=now)
        _announce(proposal)
    return proposal


def proposal_approve(
    *,
    proposal_id: str,
    approver: User,
    note: str = "",
    authenticated: Authenticated | None = None,
) -> Submission | None:
    """Record an approval. When it is the last one needed, the proposal becomes a submission
    sent as the approving supervisor, returned for sending; otherwise ``None``."""
    _expire_overdue(proposal_id)
    with transaction.atomic():
        proposal = _locked_pending(proposal_id)
        mine = refuse_own(author_id=proposal.proposed_by_id, decider=approver, verb="approve")
        if not approver.groups.filter(name=SUPERVISOR).exists():
            raise ProposalRefused(_("Only a supervisor can approve a proposal."))
        if Approval.objects.filter(proposal=proposal, approver_id__in=mine).exists():
            raise ProposalRefused(_("You have already approved this proposal."))
        now = timezone.now()
        Approval.objects.create(proposal=proposal, approver=approver, note=note, created_at=now)
        record_event(
            "proposal.approved",
            proposal=proposal,
            actor=approver,
            note=note,
            now=now,
            authenticated=authenticated,
        )
        if proposal.approvals.count() < proposal.required_approvals:
            _announce(proposal)
            return None
        proposal.state = ProposalState.APPROVED
        proposal.decided_by = approver
        proposal.decided_at = now
        proposal.decision_note = note
        proposal.save(update_fields=["state", "decided_by", "decided_at", "decision_note"])
        created = submission_create(
            action=proposal.action,
            task_id=proposal.task_id,
            queue_id=proposal.queue_id,
            expected_revision=proposal.expected_revision,
            body=proposal.body,
            created_by=proposal.proposed_by,
            sent_as=approver,
            proposal=proposal,
            note=notes.written(notes.APPROVED_BY, name=approver.get_username()),
        )
        _announce(proposal)
        return created.submission


def proposal_reject(
    *,
    proposal_id: str,
    supervisor: User,
    reason: str,
    authenticated: Authenticated | None = None,
) -> Proposal:
    if not reason.strip():
        raise ProposalRefused(_("Say why the proposal is rejected."))
    _expire_overdue(proposal_id)
    with transaction.atomic():
        proposal = _locked_pending(proposal_id)
        refuse_own(author_id=proposal.proposed_by_id, decider=supervisor, verb="reject")
        if not supervisor.groups.filter(name=SUPERVISOR).exists():
            raise ProposalRefused(_("Only a supervisor can reject a proposal."))
        return _close(
            proposal,
            ProposalState.REJECTED,
            "proposal.rejected",
            supervisor,
            reason,
            authenticated=authenticated,
        )


def proposal_withdraw(*, proposal_id: str, person: User) -> Proposal:
    _expire_overdue(proposal_id)
    with transaction.atomic():
        proposal = _locked_pending(proposal_id)
        if person.pk != proposal.proposed_by_id:
            raise ProposalRefused(_("Only the person who proposed it can withdraw a proposal."))
        return _close(proposal, ProposalState.WITHDRAWN, "proposal.withdrawn", person, "")


def expire_due(now: datetime) -> int:
    """Expire every pending proposal past its time (the reconciler runs this)."""
    due = list(
        Proposal.objects.filter(state=ProposalState.PENDING, expires_at__lte=now).values_list(
            "id", flat=True
        )
    )
    expired = 0
    for proposal_id in due:
        with transaction.atomic():
            proposal = Proposal.objects.select_for_update().get(id=proposal_id)
            expired += _expire_if_due(proposal, now)
    return expired


def _expire_overdue(proposal_id: str) -> None:
    """Record the expiry of an overdue proposal in a transaction of its own: the refusal that
    follows rolls back the decision's transaction, and the expiry must not go with it."""
    with transaction.atomic():
        proposal = Proposal.objects.select_for_update().get(id=proposal_id)
        _expire_if_due(proposal, timezone.now())


def _locked_pending(proposal_id: str) -> Proposal:
    proposal = Proposal.objects.select_for_update().select_related("decided_by").get(id=proposal_id)
    _expire_if_due(proposal, timezone.now())
    if not proposal.is_pending:
        state = proposal.get_state_display()
        if proposal.decided_by is None:  # expired: nobody decided it
            raise ProposalRefused(
                _("This proposal was already decided: %(state)s.") % {"state": state}
            )
        raise ProposalRefused(
            _("This proposal was already decided by %(who)s: %(state)s.")
            % {"state": state, "who": shown_name(proposal.decided_by)}
        )
    return proposal


def _expire_if_due(proposal: Proposal, now: datetime) -> bool:
    if not proposal.is_pending or proposal.expires_at > now:
        return False
    _close(proposal, ProposalState.EXPIRED, "proposal.expired", None, "")
    return True


def _close(
    proposal: Proposal,
    state: str,
    kind: str,
    actor: User | None,
    note: str,
    *,
    authenticated: Authenticated | None = None,
) -> Proposal:
    now = timezone.now()
    proposal.state = state
    proposal.decided_by = actor
    proposal.decided_at = now
    proposal.decision_note = note
    proposal.decision_slot = None
    proposal.save(
        update_fields=["state", "decided_by", "decided_at", "decision_note", "decision_slot"]
    )
    record_event(
        kind, proposal=proposal, actor=actor, note=note, now=now, authenticated=authenticated
    )
    _announce(proposal)
    return proposal


def _announce(proposal: Proposal) -> None:
    """Tell the supervisors' approvals queue (live) that this proposal changed."""
    publish_on_commit(
        APPROVALS_GROUP,
        {"type": APPROVALS_MESSAGE, "proposal_id": proposal.id, "state": proposal.state},
    )


def proposal_outcome(proposal: Proposal) -> Submission | None:
    """The submission an approval produced, if any (its state tells what the platform said)."""
    return Submission.objects.filter(proposal=proposal).first()
