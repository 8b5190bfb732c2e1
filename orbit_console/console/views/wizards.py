"""The review and retry wizards: verify → decide → confirm, then a durable submission.

Both wizards share one engine. The first page pins the task's revision in a signed hidden field;
every later page carries what was typed so far (hidden for the other steps), re-reads the task
to show its present state, and validates everything up to the current step, so that an error
is shown inline and nothing typed is lost — nor when the session ends before a step is sent
(``keeps_draft``: the step comes back after signing in). The final step stores the exact
request body as a submission before sending it.
"""

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from asgiref.sync import sync_to_async
from django import forms
from django.contrib import messages
from django.core import signing
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect, QueryDict
from django.urls import reverse
from django.utils import timezone
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy
from django.views.decorators.http import require_http_methods

from orbit_console.client import RetryTaskRequest, ReviewTaskRequest, Task
from orbit_console.console import forms as wizard_forms
from orbit_console.console.availability import (
    PROPOSE,
    Availability,
    recovery_mode,
    retry_availability,
    review_availability,
)
from orbit_console.console.views.common import (
    NoCredentialError,
    arender,
    console_view,
    kept_decision,
    set_aside,
    task_client,
)
from orbit_console.console.views.drafts import keeps_draft, take_draft
from orbit_console.console.views.tasks import task_id_or_404
from orbit_console.console.waiting import pending_proposal_on
from orbit_console.decisions.evidence import policy_for
from orbit_console.decisions.proposals import proposal_create
from orbit_console.decisions.submissions import (
    DecidedOn,
    submission_create,
    submission_send,
    waiting_since,
)
from orbit_console.lib import strictjson
from orbit_console.lib.errorcodes import error_code
from orbit_console.lib.recovery_rules import MAX_RESULT_BYTES
from orbit_console.lib.rfc3339 import TimeFormatError, format_utc, parse_utc
from orbit_console.ops.views import remember_stored
from orbit_console.people.access import require_task_access
from orbit_console.people.accounts import mark_company, shown_name
from orbit_console.people.person import Person

_PIN_SALT = "orbit.console.wizard.pin"
_CONTROL_FIELDS = {"csrfmiddlewaretoken", "pin", "step", "nav"}


@dataclass(frozen=True)
class Step:
    name: str
    title: Any
    form: type[forms.Form]


@dataclass(frozen=True)
class Wizard:
    action: str
    title: Any
    steps: tuple[Step, ...]
    availability: Callable[[Task, Person], Availability]
    build_body: Callable[[str, dict[str, Any]], str]
    form_kwargs: Callable[[HttpRequest, "Pin", str], dict[str, Any]]


def _review_body(revision: str, data: dict[str, Any]) -> str:
    request = ReviewTaskRequest(
        expected_revision=revision,
        reason=data["reason"],
        evidence_ref=data["evidence_ref"],
        outcome=data["outcome"],
        result=data["result"],
    )
    pretty = request.to_json(indent=2)
    # The API measures the result as sent (O5) and the whole body (C6): indenting a large
    # result can multiply it past both limits, so a large decision is sent compact.
    if len(pretty.encode()) > MAX_RESULT_BYTES:
        return request.to_json()
    return pretty


def _retry_body(revision: str, data: dict[str, Any]) -> str:
    return RetryTaskRequest(
        expected_revision=revision,
        reason=data["reason"],
        evidence_ref=data["evidence_ref"],
        task_timeout_ms=data["task_timeout_ms"],
        available_at=data.get("available_at_utc"),
        start_deadline_at=data.get("start_deadline_at_utc"),
    ).to_json(indent=2)


def _no_kwargs(request: HttpRequest, pin: "Pin", step: str) -> dict[str, Any]:
    return {}


def _retry_kwargs(request: HttpRequest, pin: "Pin", step: str) -> dict[str, Any]:
    if step != "decide":
        return {}
    zone = request.zone  # type: ignore[attr-defined]
    return {"attempt_timeout_ms": pin.attempt_timeout_ms, "zone": zone}


REVIEW = Wizard(
    action="review",
    title=gettext_lazy("Review"),
    steps=(
        Step("verify", gettext_lazy("Verify"), wizard_forms.ReviewVerifyForm),
        Step("decide", gettext_lazy("Decide"), wizard_forms.ReviewDecideForm),
        Step("confirm", gettext_lazy("Confirm"), wizard_forms.ReviewConfirmForm),
    ),
    availability=review_availability,
    build_body=_review_body,
    form_kwargs=_no_kwargs,
)

RETRY = Wizard(
    action="retry",
    title=gettext_lazy("Retry"),
    steps=(
        Step("verify", gettext_lazy("Verify"), wizard_forms.RetryVerifyForm),
        Step("decide", gettext_lazy("Decide"), wizard_forms.RetryDecideForm),
        Step("confirm", gettext_lazy("Confirm"), wizard_forms.RetryConfirmForm),
    ),
    availability=retry_availability,
    build_body=_retry_body,
    form_kwargs=_retry_kwargs,
)


async def _evidence_kwargs(pin: "Pin") -> dict[str, Any]:
    """The namespace's evidence policy for the step that asks for the evidence reference."""
    return {"evidence_policy": await sync_to_async(policy_for)(pin.namespace_id)}


def _if_evidence(step: Step, evidence: dict[str, Any]) -> dict[str, Any]:
    return evidence if issubclass(step.form, wizard_forms.ReasonEvidenceMixin) else {}


def _same_page(request: HttpRequest, **kwargs: str) -> str:
    """The wizard's steps are all shown at its own address."""
    return request.path


@require_http_methods(["GET", "POST"])
@console_view
@keeps_draft(_same_page)
async def review_wizard(request: HttpRequest, task_id: str) -> HttpResponse:
    return await _run(request, task_id, REVIEW)


@require_http_methods(["GET", "POST"])
@console_view
@keeps_draft(_same_page)
async def retry_wizard(request: HttpRequest, task_id: str) -> HttpResponse:
    return await _run(request, task_id, RETRY)


async def _run(request: HttpRequest, task_id: str, wizard: Wizard) -> HttpResponse:
    task_id = task_id_or_404(task_id)
    person: Person = request.person  # type: ignore[attr-defined]
    if not person.credentials:
        raise NoCredentialError  # explained on its own page, not as a bare 403
    mode = recovery_mode(person, wizard.action)
    if mode is None:
        raise PermissionDenied
    if request.method == "GET":
        draft = await take_draft(request)
        if draft is not None and draft.posted_to == request.path:
            return await _resume(request, wizard, task_id, _query_dict(draft.fields))
        task = await _read_task(request, task_id, step_index=0)
        availability = wizard.availability(task, person)
        waiting = await sync_to_async(pending_proposal_on)(task.id)
        if waiting is not None:
            await sync_to_async(mark_company)([waiting.proposed_by])
            # Issue 30: a second person learned only after three steps that nothing was sent.
            availability.reasons.append(
                _(
                    "A proposal on this task, made by %(who)s, is waiting for a supervisor's "
                    "approval: nothing else is decided on it until it is approved or rejected."
                )
                % {"who": shown_name(waiting.proposed_by)}
            )
        if not availability.allowed:
            context = {"wizard": wizard, "task": task, "availability": availability}
            return await arender(request, "console/wizard_unavailable.html", context, status=409)
        attempts = request.wizard_attempts  # type: ignore[attr-defined]
        since = waiting_since(task)
        first = Pin(
            wizard.action,
            task.id,
            task.revision,
            _attempt_timeout_ms(task),
            task.queue_id,
            task.namespace_id,
            task.handler,
            # When the decision was started, and what it is made on (docs/insight.md): the
            # newest attempt comes first in the verify step's read.
            format_utc(timezone.now()),
            error_code(attempts.items[0].error) if attempts.items else "",
            format_utc(since) if since else "",
        )
        kept = await _kept_fields(request)
        if kept:
            messages.info(
                request,
                _(
                    "This decision starts from yours that was not sent. Check it against the "
                    "task as it is now."
                ),
            )
        return await _render(request, wizard, task, first, step_index=0, data=None, kept=kept)

    pinned = Pin.read(request.POST.get("pin", ""), wizard, task_id)
    if pinned is None:
        await require_task_access(person, task_id)  # the page to start again from is theirs
        messages.warning(request, _("The wizard's page was out of date; it has started again."))
        return HttpResponseRedirect(request.path)
    pin = pinned
    names = [step.name for step in wizard.steps]
    step_name = request.POST.get("step", "")
    index = names.index(step_name) if step_name in names else 0
    if request.POST.get("nav") == "back":
        back = max(0, index - 1)
        task = await _read_task(request, task_id, step_index=back)
        return await _render(request, wizard, task, pin, step_index=back, data=None)
    if request.POST.get("nav") == "stay":
        # The page's own "sign in to continue" (static/js/console.js): the same step again,
        # never a move and never a submission.
        return await _show_step(request, wizard, task_id, pin, index, request.POST)

    cleaned: dict[str, Any] = {}
    evidence = await _evidence_kwargs(pin)
    for position, step in enumerate(wizard.steps[: index + 1]):
        kwargs = {**wizard.form_kwargs(request, pin, step.name), **_if_evidence(step, evidence)}
        form = step.form(request.POST, **kwargs)
        if not form.is_valid():
            task = await _read_task(request, task_id, step_index=position)
            return await _render(
                request, wizard, task, pin, step_index=position, data=form, cleaned=cleaned
            )
        cleaned.update(form.cleaned_data)
    if index + 1 < len(wizard.steps):
        task = await _read_task(request, task_id, step_index=index + 1)
        return await _render(
            request, wizard, task, pin, step_index=index + 1, data=None, cleaned=cleaned
        )
    # The decision is complete. Store it before anything else can fail, then send it: from here
    # on nothing depends on the API answering (an unreachable API means "outcome unknown").
    if mode == PROPOSE:
        return await _propose(request, wizard, pin, cleaned)
    return await _submit(request, wizard, pin, cleaned)


async def _resume(
    request: HttpRequest, wizard: Wizard, task_id: str, fields: QueryDict
) -> HttpResponse:
    """Back after signing in again: the step the person was on, with everything they had
    typed and the revision they pinned (a task that moved meanwhile says so, as on any step).
    Whatever they pressed is not done for them: they look at the step and go on."""
    pin = Pin.read(fields.get("pin", ""), wizard, task_id)
    if pin is None:
        return HttpResponseRedirect(request.path)
    names = [step.name for step in wizard.steps]
    step_name = fields.get("step", "")
    index = names.index(step_name) if step_name in names else 0
    messages.info(
        request,
        _(
            "You were signed out before this step was sent. Everything you typed is here "
            "again: check it and go on."
        ),
    )
    return await _show_step(request, wizard, task_id, pin, index, fields)


async def _show_step(
    request: HttpRequest,
    wizard: Wizard,
    task_id: str,
    pin: "Pin",
    index: int,
    posted: QueryDict,
) -> HttpResponse:
    """Step ``index`` as it stood, from ``posted``: the steps before it are checked again (the
    confirm step shows the body they make), this one is shown without judging it."""
    cleaned: dict[str, Any] = {}
    for position, step in enumerate(wizard.steps[:index]):
        form = step.form(posted, **wizard.form_kwargs(request, pin, step.name))
        if not form.is_valid():
            task = await _read_task(request, task_id, step_index=position)
            return await _render(
                request,
                wizard,
                task,
                pin,
                step_index=position,
                data=form,
                cleaned=cleaned,
                kept=posted,
            )
        cleaned.update(form.cleaned_data)
    task = await _read_task(request, task_id, step_index=index)
    return await _render(
        request, wizard, task, pin, step_index=index, data=None, cleaned=cleaned, kept=posted
    )


def _query_dict(fields: list[tuple[str, str]]) -> QueryDict:
    data = QueryDict(mutable=True)
    for name, value in fields:
        data.appendlist(name, value)
    return data


async def _propose(
    request: HttpRequest, wizard: Wizard, pin: "Pin", cleaned: dict[str, Any]
) -> HttpResponse:
    """Four eyes: the decision waits for a supervisor, exactly as it would have been sent."""
    body = wizard.build_body(pin.revision, cleaned)
    outcome = await sync_to_async(proposal_create)(
        action=wizard.action,
        task_id=pin.task_id,
        queue_id=pin.queue_id,
        namespace_id=pin.namespace_id,
        handler=pin.handler,
        expected_revision=pin.revision,
        body=body,
        proposed_by=request.user,  # type: ignore[arg-type]
        decided_on=pin.decided_on(),
    )
    if outcome.created:
        messages.success(request, _("Your proposal waits for a supervisor's approval."))
    elif outcome.proposal.body != body:
        await set_aside(request, outcome.proposal.id, body)
    else:
        messages.info(
            request,
            _("A decision for this task at revision %(revision)s had already been proposed.")
            % {"revision": pin.revision},
        )
    return HttpResponseRedirect(reverse("console:proposal", args=[outcome.proposal.id]), status=303)


async def _submit(
    request: HttpRequest, wizard: Wizard, pin: "Pin", cleaned: dict[str, Any]
) -> HttpResponse:
    body = wizard.build_body(pin.revision, cleaned)
    outcome = await sync_to_async(submission_create)(
        action=wizard.action,
        task_id=pin.task_id,
        queue_id=pin.queue_id,
        namespace_id=pin.namespace_id,
        expected_revision=pin.revision,
        body=body,
        created_by=request.user,  # type: ignore[arg-type]
        decided_on=pin.decided_on(),
    )
    submission = outcome.submission
    remember_stored(request, reverse("console:submission", args=[submission.id]))
    if outcome.created:
        person: Person = request.person  # type: ignore[attr-defined]
        await submission_send(submission, actor=person.user, held=person.credentials)
    elif submission.body != body:
        await set_aside(request, submission.id, body)
    else:
        messages.info(
            request,
            _("A decision for this task at revision %(revision)s had already been submitted.")
            % {"revision": pin.revision},
        )
    return HttpResponseRedirect(reverse("console:submission", args=[submission.id]), status=303)


async def _read_task(request: HttpRequest, task_id: str, *, step_index: int) -> Task:
    """The task as it is now, for the page of step ``step_index``. The first step (verify)
    also shows the evidence, the task's attempts: read then only, and kept on the request."""
    async with await task_client(request, task_id) as orbit:
        if step_index != 0:
            request.wizard_attempts = None  # type: ignore[attr-defined]
            return await orbit.get_task(task_id)
        task, attempts = await asyncio.gather(
            orbit.get_task(task_id), orbit.list_attempts(task_id, limit=50)
        )
    request.wizard_attempts = attempts  # type: ignore[attr-defined]
    return task


def _attempt_timeout_ms(task: Task) -> int:
    return task.retry.attempt_timeout_ms if task.retry else 1


@dataclass(frozen=True)
class Pin:
    """What the first step saw, signed into the form so that it cannot drift: the decision is
    pinned to this revision, and a retry's budget to this attempt timeout. The task's queue and
    namespace go with the decision into the console's records, and so does what the decision
    is made on (``DecidedOn``): when the wizard was opened, the last attempt's error code and
    since when the task has waited. Pins signed before a field was added have it empty."""

    action: str
    task_id: str
    revision: str
    attempt_timeout_ms: int
    queue_id: str
    namespace_id: str
    handler: str = ""  # for the approvals queue
    opened_at: str = ""  # RFC 3339 UTC
    last_error_code: str = ""
    waiting_since: str = ""  # RFC 3339 UTC

    def dumps(self) -> str:
        fields = [
            self.action,
            self.task_id,
            self.revision,
            self.attempt_timeout_ms,
            self.queue_id,
            self.namespace_id,
            self.handler,
            self.opened_at,
            self.last_error_code,
            self.waiting_since,
        ]
        return signing.dumps(fields, salt=_PIN_SALT)

    def decided_on(self) -> DecidedOn:
        return DecidedOn(
            handler=self.handler,
            last_error_code=self.last_error_code,
            waiting_since=_time_or_none(self.waiting_since),
            started_at=_time_or_none(self.opened_at),
        )

    @classmethod
    def read(cls, text: str, wizard: Wizard, task_id: str) -> "Pin | None":
        try:
            pin = cls(*signing.loads(text, salt=_PIN_SALT))
        except (signing.BadSignature, ValueError, TypeError):
            return None
        if pin.action != wizard.action or pin.task_id != task_id:
            return None
        return pin


async def _render(
    request: HttpRequest,
    wizard: Wizard,
    task: Task,
    pin: Pin,
    *,
    step_index: int,
    data: forms.Form | None,
    cleaned: dict[str, Any] | None = None,
    kept: QueryDict | None = None,
) -> HttpResponse:
    """Show one step. ``data`` is the bound form of this step when it has errors; otherwise the
    step's form starts from what was typed earlier: in the POST data, or ``kept`` — a decision
    that was set aside (on a first step), or a draft given back after signing in again."""
    step = wizard.steps[step_index]
    kwargs = {
        **wizard.form_kwargs(request, pin, step.name),
        **_if_evidence(step, await _evidence_kwargs(pin)),
    }
    posted = kept if kept is not None else request.POST if request.method == "POST" else QueryDict()
    form = data or step.form(initial=_initial(step.form, posted), **kwargs)
    # Where the keyboard lands: on the first field to fix after a failed step, on the new
    # step's heading after a move (a screen reader then reads where the person is).
    wrong = next((name for name in form.fields if data is not None and name in data.errors), None)
    if wrong is not None:
        form.fields[wrong].widget.attrs["autofocus"] = True
    own = set(form.fields)
    carry = [
        (name, value)
        for name in posted
        if name not in own and name not in _CONTROL_FIELDS
        for value in posted.getlist(name)  # type: ignore[attr-defined]
    ]
    revision = pin.revision
    context = {
        "wizard": wizard,
        "task": task,
        "pin": pin.dumps(),
        "pinned": pin,  # what the decision is made on: precedent's, on the decide step
        "pinned_revision": revision,
        "moved": revision != task.revision,
        "steps": wizard.steps,
        "step": step,
        "step_index": step_index,
        "form": form,
        "carry": carry,
        "availability": wizard.availability(task, request.person),  # type: ignore[attr-defined]
        "proposing": recovery_mode(request.person, wizard.action) == PROPOSE,  # type: ignore[attr-defined]
        "body": wizard.build_body(revision, cleaned)
        if cleaned and step.name == "confirm"
        else None,
        "attempts": request.wizard_attempts,  # type: ignore[attr-defined]
        "focus_heading": request.method == "POST" and wrong is None,
    }
    status = 400 if data is not None else 200
    return await arender(request, "console/wizard.html", context, status=status)


async def _kept_fields(request: HttpRequest) -> QueryDict:
    """A new decision started from one that was set aside (``?from=<the id of the decision
    that stood>``, console/partials/set_aside.html): the fields start from what the person typed
    then, in their session — reason, evidence, a review's outcome and result (its exact JSON), a
    retry's budget. The checks of the first steps are theirs to make again, on the task as it
    is now; a retry's start window is chosen again."""
    fields = QueryDict(mutable=True)
    standing_id = request.GET.get("from", "")
    body = await kept_decision(request, standing_id) if standing_id else None
    if body is None:
        return fields
    members = strictjson.parse_object(body.encode())  # the console wrote it: valid JSON
    for name in ("reason", "evidence_ref", "outcome"):
        if name in members and isinstance(members[name].value, str):
            fields[name] = members[name].value
    if "result" in members:
        fields["result"] = strictjson.dumps(strictjson.loads(members["result"].raw), indent=2)
    timeout = members["task_timeout_ms"].value if "task_timeout_ms" in members else None
    if isinstance(timeout, int) and timeout > 0:
        # The largest of the form's units that holds it whole (none: the budget is typed again).
        units = sorted(wizard_forms.DURATION_UNITS.items(), key=lambda unit: -unit[1])
        for unit, unit_ms in units:
            if timeout % unit_ms == 0:
                fields["budget_value"], fields["budget_unit"] = str(timeout // unit_ms), unit
                break
    return fields


def _time_or_none(text: str) -> datetime | None:
    try:
        return parse_utc(text) if text else None
    except TimeFormatError:
        return None


def _initial(form_class: type[forms.Form], posted: Any) -> dict[str, Any]:
    initial: dict[str, Any] = {}
    for name, field in form_class.base_fields.items():
        if name in posted:
            initial[name] = True if isinstance(field, forms.BooleanField) else posted.get(name)
    return initial
