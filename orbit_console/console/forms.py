"""The forms of the review and retry wizards and of the work queue's filters.

Each field is checked with the recovery API's own limits (``lib.recovery_rules``) so that a
mistake is explained inline, next to the field, before anything is sent.
"""

import re
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from django import forms
from django.utils import timezone
from django.utils.translation import gettext_lazy as _
from django.utils.translation import ngettext

from orbit_console.decisions.evidence import matches as evidence_matches
from orbit_console.decisions.models import EVENT_LABELS, EvidencePolicy, SubmissionState
from orbit_console.lib import strictjson
from orbit_console.lib.recovery_rules import (
    MAX_EVIDENCE_REF_CHARS,
    MAX_REASON_CHARS,
    MAX_RESULT_BYTES,
    MAX_TASK_TIMEOUT_MS,
    RuleError,
    check_evidence_ref,
    check_reason,
)
from orbit_console.lib.rfc3339 import MAX_YEAR, MIN_YEAR

TASK_STATES = ["NEEDS_REVIEW", "FAILED", "CANCELLED", "WAITING", "RUNNING", "SUCCEEDED"]


class FindTask(forms.Form):
    """The work queue's "find a task by id" box: the whole id as the copy buttons copy it. A
    pasted id keeps working with spaces, capitals, dashes (a UUID's) or the task page's URL."""

    find = forms.CharField(
        label=_("Find a task by id"),
        max_length=300,
        help_text=_("The whole id, 32 characters: the Copy button beside an id copies it."),
        # On a phone the label gives way to this (static/css/console.css).
        widget=forms.TextInput(
            attrs={
                "placeholder": _("Find a task by id"),
                "autocomplete": "off",
                "spellcheck": "false",
            }
        ),
    )

    def clean_find(self) -> str:
        text = self.cleaned_data["find"].strip()
        text = text.rstrip("/").rsplit("/", 1)[-1]  # a pasted task page URL
        candidate = text.replace("-", "").replace(" ", "").lower()
        if not re.fullmatch(r"[0-9a-f]{32}", candidate):
            raise forms.ValidationError(
                _("A task id is 32 hexadecimal characters; “%(text)s” is not one."),
                params={"text": text[:40]},
                code="invalid",
            )
        return candidate


class WorkQueueFilters(forms.Form):
    namespace = forms.ChoiceField(label=_("Namespace"), required=False)
    state = forms.ChoiceField(
        label=_("State"),
        required=False,
        choices=[("", _("Needs a person"))] + [(state, state) for state in TASK_STATES],
    )
    queue_id = forms.RegexField(
        label=_("Queue id"),
        required=False,
        regex=r"^[0-9a-f]{32}$",
        error_messages={"invalid": _("A queue id is 32 lowercase hexadecimal characters.")},
    )
    handler = forms.CharField(label=_("Handler"), required=False, max_length=200)
    business_key = forms.CharField(label=_("Business key"), required=False, max_length=512)
    business_key_prefix = forms.CharField(
        label=_("Business key starts with"), required=False, max_length=255
    )
    error = forms.CharField(label=_("Error text"), required=False, max_length=200)
    updated_after = forms.DateTimeField(
        label=_("Updated from"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    updated_before = forms.DateTimeField(
        label=_("Updated before"),
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    # The API's orders (docs/api.md "The task list"); empty: its default, newest created first.
    order = forms.ChoiceField(
        label=_("Sort"),
        required=False,
        choices=[
            ("", _("Newest first")),
            ("created_asc", _("Oldest first")),
            ("updated_desc", _("Recently updated first")),
            ("updated_asc", _("Least recently updated first")),
        ],
    )

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        if cleaned.get("business_key") and cleaned.get("business_key_prefix"):
            self.add_error("business_key_prefix", _("Give a business key or its start, not both."))
        after, before = cleaned.get("updated_after"), cleaned.get("updated_before")
        if after and before and after >= before:
            self.add_error("updated_before", _("This must be later than “Updated from”."))
        return cleaned

    def __init__(
        self, *args: Any, namespaces: Sequence[tuple[str, str]] = (), **kwargs: Any
    ) -> None:
        """``namespaces``: (id, label) of the person's credentials; a choice only when several."""
        super().__init__(*args, **kwargs)
        field = self.fields["namespace"]
        if len(namespaces) > 1:
            field.choices = list(namespaces)  # type: ignore[attr-defined]
        else:
            del self.fields["namespace"]


def _rule(check: Any, value: str) -> str:
    """The API's rule, its words ("must not be blank") said as a sentence in the voice of the
    form's other errors ("This field is required."): one voice per page (issue 30)."""
    try:
        return check(value)
    except RuleError as exc:
        raise forms.ValidationError(
            _("This field %(rule)s.") % {"rule": exc.translated()}
        ) from None


class UncutText(forms.CharField):
    """Text that is never cut: no ``maxlength`` attribute (a browser silently truncates a paste
    to it), a live counter of what is left or too much instead (``data-max-chars``, console.js),
    and the server's refusal, with the count, of what is too long."""

    def widget_attrs(self, widget: forms.Widget) -> dict[str, Any]:
        attrs = super().widget_attrs(widget)
        attrs.pop("maxlength", None)
        if self.max_length is not None:
            attrs["data-max-chars"] = str(self.max_length)
            attrs["data-counter-left"] = _("{count} of {max} characters")
            attrs["data-counter-over"] = _(
                "{over} characters too many: nothing was cut, shorten the text to {max}"
            )
        return attrs


class ReasonEvidenceMixin(forms.Form):
    reason = UncutText(
        label=_("Reason"),
        widget=forms.Textarea(attrs={"rows": 3}),
        strip=False,
        max_length=MAX_REASON_CHARS,
        help_text=_("Why this decision is right: 1 to 1024 characters, not blank."),
    )
    evidence_ref = UncutText(
        label=_("Evidence reference"),
        strip=False,
        max_length=MAX_EVIDENCE_REF_CHARS,
        help_text=_(
            "A reference to the record that proves it, such as evidence:reconciliation-001: "
            "no spaces, at most 512 characters, never a secret. Orbit stores the reference only."
        ),
    )

    def __init__(self, *args: Any, evidence_policy: EvidencePolicy | None = None, **kwargs: Any):
        """``evidence_policy``: the task's namespace's rule for evidence references, if it has
        one (its example is shown, the pattern checked before the decision is confirmed)."""
        super().__init__(*args, **kwargs)
        self.evidence_policy = evidence_policy
        if evidence_policy is not None:
            field = self.fields["evidence_ref"]
            field.help_text = _(
                "This namespace's evidence references look like %(example)s. Never a secret; "
                "Orbit stores the reference only."
            ) % {"example": evidence_policy.example}
            field.widget.attrs["placeholder"] = evidence_policy.example

    def clean_reason(self) -> str:
        return _rule(check_reason, self.cleaned_data["reason"])

    def clean_evidence_ref(self) -> str:
        reference = _rule(check_evidence_ref, self.cleaned_data["evidence_ref"])
        policy = self.evidence_policy
        if policy is not None and not evidence_matches(policy, reference):
            raise forms.ValidationError(
                _("In this namespace an evidence reference looks like %(example)s.")
                % {"example": policy.example}
            )
        return reference


class ReviewVerifyForm(forms.Form):
    """Step 1: the evidence checklist of the seed."""

    checked_history = forms.BooleanField(
        label=_("I read the execution history: every attempt, its outcome and its error."),
    )
    checked_late_evidence = forms.BooleanField(
        label=_("I looked for late evidence: reports that arrived after an attempt ended."),
    )
    checked_external = forms.BooleanField(
        label=_("I checked the external systems and records this task acts on."),
    )
    checked_lease = forms.BooleanField(
        label=_(
            "I understand that an expired lease alone proves nothing: the platform cannot stop "
            "a remote execution, nor prove that it had no effect."
        ),
    )


class ReviewDecideForm(ReasonEvidenceMixin):
    """Step 2: the outcome, the result, the reason and the evidence."""

    outcome = forms.ChoiceField(
        label=_("Outcome"),
        choices=[
            ("SUCCEEDED", _("SUCCEEDED: the work was done")),
            ("FAILED", _("FAILED: it was not")),
        ],
        widget=forms.RadioSelect,
    )
    result = forms.CharField(
        label=_("Result (JSON)"),
        widget=forms.Textarea(attrs={"rows": 6, "spellcheck": "false"}),
        strip=False,
        help_text=_(
            "Any JSON value except null, at most 256 KiB, for example "
            '{"confirmed": true}. Numbers are kept exactly as written.'
        ),
    )
    field_order = ["outcome", "result", "reason", "evidence_ref"]

    def clean_result(self) -> Any:
        text = self.cleaned_data["result"].strip()
        if len(text.encode()) > MAX_RESULT_BYTES:
            raise forms.ValidationError(_("The result is larger than 256 KiB."))
        try:
            value = strictjson.loads(text)
        except strictjson.JSONError as exc:
            raise forms.ValidationError(
                _("This is not valid JSON: %(why)s") % {"why": exc.translated()}
            ) from None
        if value is None:
            raise forms.ValidationError(_("The result must not be null."))
        # Sent compact, it is never longer than typed (numbers keep their spelling), so the
        # limit checked above holds for what the API measures (O5).
        return value


class ReviewConfirmForm(forms.Form):
    execution_settled = forms.BooleanField(
        label=_(
            "I confirm that every earlier execution of this task has ended and will have no "
            "further effect (execution_settled)."
        ),
    )


class RetryVerifyForm(forms.Form):
    """Step 1: the eligibility checklist."""

    checked_history = forms.BooleanField(
        label=_("I read the execution history and the reason this task ended."),
    )
    checked_external = forms.BooleanField(
        label=_("I checked that the earlier execution has ended and left nothing half done."),
    )
    checked_business_key = forms.BooleanField(
        label=_(
            "I understand that the new task keeps the same business key: the work it does must "
            "be safe to do again, and its new id is not a business identity."
        ),
    )


class BatchReviewVerifyForm(forms.Form):
    """A review batch's verify step: the single review's checklist, for every task at once
    (issue 30: the decide step opens only after it, as for one task)."""

    checked_sample = forms.BooleanField(
        label=_(
            "I opened tasks of the sample: their execution history, outcomes and errors are "
            "what the incident explains."
        ),
    )
    checked_left_out = forms.BooleanField(
        label=_("I read why the others are left out, and none of them belongs in this decision."),
    )
    checked_external = forms.BooleanField(
        label=_("I checked the external systems and records these tasks act on."),
    )
    checked_lease = ReviewVerifyForm.base_fields["checked_lease"]


class BatchRetryVerifyForm(forms.Form):
    """A retry batch's verify step: the single retry's checklist, for every task at once."""

    checked_sample = BatchReviewVerifyForm.base_fields["checked_sample"]
    checked_left_out = BatchReviewVerifyForm.base_fields["checked_left_out"]
    checked_external = forms.BooleanField(
        label=_("I checked that every earlier execution has ended and left nothing half done."),
    )
    checked_business_key = forms.BooleanField(
        label=_(
            "I understand that each new task keeps its business key: the work must be safe to "
            "do again for every one of these tasks."
        ),
    )


class BatchConfirmForm(forms.Form):
    """A batch's confirm step: the number of tasks typed back, and the confirmation ticked.
    A mistake is told at its field; nothing typed or ticked is cleared (issue 30)."""

    count = forms.IntegerField(
        label=_("Type the number of tasks to be sent"),
        min_value=0,
        widget=forms.TextInput(attrs={"inputmode": "numeric", "autocomplete": "off"}),
        error_messages={"invalid": _("Type a whole number.")},
    )
    confirm = forms.BooleanField(
        label=_(
            "I have checked the selection and the decision, and the evidence supports it for "
            "every one of these tasks."
        ),
        error_messages={"required": _("Tick the confirmation to send the batch.")},
    )

    def __init__(self, *args: Any, eligible: int, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.eligible = eligible
        self.fields["count"].help_text = ngettext(
            "%(count)s task is eligible.", "%(count)s tasks are eligible.", eligible
        ) % {"count": eligible}

    def clean_count(self) -> int:
        typed: int = self.cleaned_data["count"]
        if typed != self.eligible:
            raise forms.ValidationError(
                _("Type the number of tasks to be sent: %(count)s.") % {"count": self.eligible}
            )
        return typed


DURATION_UNITS = {"s": 1_000, "min": 60_000, "h": 3_600_000, "d": 86_400_000}


class RetryDecideForm(ReasonEvidenceMixin):
    """Step 2: reason, evidence, the new task's budget and its optional start window."""

    budget_value = forms.IntegerField(label=_("Task budget"), min_value=1)
    budget_unit = forms.ChoiceField(
        label=_("Unit"),
        choices=[("s", _("seconds")), ("min", _("minutes")), ("h", _("hours")), ("d", _("days"))],
        initial="min",
    )
    available_at = forms.DateTimeField(
        label=_("Earliest start (your local time)"),
        required=False,
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}),
        help_text=_("Empty: as soon as possible."),
    )
    start_deadline_at = forms.DateTimeField(
        label=_("Start deadline (your local time)"),
        required=False,
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local", "step": "1"}),
        help_text=_("Empty: no separate limit; the task must start before its budget runs out."),
    )
    field_order = [
        "reason",
        "evidence_ref",
        "budget_value",
        "budget_unit",
        "available_at",
        "start_deadline_at",
    ]

    def __init__(self, *args: Any, attempt_timeout_ms: int, zone: ZoneInfo, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.attempt_timeout_ms = attempt_timeout_ms
        self.zone = zone
        self.fields["budget_value"].help_text = _(
            "The new task's whole time budget from acceptance, at most 30 days and at least the "
            "attempt timeout (%(timeout)s s)."
        ) % {"timeout": f"{attempt_timeout_ms / 1000:g}"}

    def _local(self, name: str) -> datetime | None:
        value = self.cleaned_data.get(name)
        if value is None:
            return None
        # Django made it aware in the active time zone: that is the person's own.
        value = timezone.make_naive(value) if timezone.is_aware(value) else value
        aware = value.replace(tzinfo=self.zone)
        if not MIN_YEAR <= aware.astimezone(ZoneInfo("UTC")).year <= MAX_YEAR:
            raise forms.ValidationError({name: _("The year must be between 2000 and 9998.")})
        return aware

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        value, unit = cleaned.get("budget_value"), cleaned.get("budget_unit")
        if value is not None and unit in DURATION_UNITS:
            budget_ms = value * DURATION_UNITS[unit]
            if budget_ms > MAX_TASK_TIMEOUT_MS:
                self.add_error("budget_value", _("The budget may be at most 30 days."))
            elif budget_ms < self.attempt_timeout_ms:
                self.add_error(
                    "budget_value",
                    _("The budget must be at least the attempt timeout (%(timeout)s s).")
                    % {"timeout": f"{self.attempt_timeout_ms / 1000:g}"},
                )
            else:
                cleaned["task_timeout_ms"] = budget_ms
        try:
            available_at = self._local("available_at")
            start_deadline_at = self._local("start_deadline_at")
        except forms.ValidationError as exc:
            self.add_error(None, exc)
            return cleaned
        now = timezone.now()
        budget = cleaned.get("task_timeout_ms")
        deadline = now + timedelta(milliseconds=budget) if budget else None
        if available_at is not None:
            if available_at < now - timedelta(seconds=1):
                self.add_error("available_at", _("The earliest start must not be in the past."))
            elif deadline is not None and available_at >= deadline:
                self.add_error(
                    "available_at", _("The earliest start must be before the budget runs out.")
                )
        if start_deadline_at is not None:
            if start_deadline_at <= now:
                self.add_error("start_deadline_at", _("The start deadline must be in the future."))
            elif available_at is not None and start_deadline_at < available_at:
                self.add_error(
                    "start_deadline_at",
                    _("The start deadline must not be before the earliest start."),
                )
            elif deadline is not None and start_deadline_at > deadline:
                self.add_error(
                    "start_deadline_at",
                    _("The start deadline must not be after the budget runs out."),
                )
        cleaned["available_at_utc"] = available_at
        cleaned["start_deadline_at_utc"] = start_deadline_at
        return cleaned


class RetryConfirmForm(forms.Form):
    safe_to_retry = forms.BooleanField(
        label=_(
            "I confirm that the earlier execution has ended and that running this task again "
            "under the same business identity is safe (safe_to_retry)."
        ),
    )


class ExplorerFilters(forms.Form):
    """The audit explorer's filters. Times are in the person's time zone."""

    person = forms.CharField(
        label=_("Person"),
        required=False,
        max_length=150,
        help_text=_("A user name or its first letters."),
    )
    kind = forms.ChoiceField(label=_("Action"), required=False)
    outcome = forms.ChoiceField(
        label=_("Outcome"),
        required=False,
        choices=[("", _("Any")), *list(SubmissionState.choices)],
    )
    # Ids or their first characters (the 8 the pages show are enough): explorer.ambiguous
    # refuses a start shared by several.
    task_id = forms.RegexField(
        label=_("Task id"),
        required=False,
        regex=r"^[0-9a-f]{1,32}$",
        error_messages={
            "invalid": _("A task id, or its first characters: lowercase hexadecimal (0-9, a-f).")
        },
    )
    queue_id = forms.RegexField(
        label=_("Queue id"),
        required=False,
        regex=r"^[0-9a-f]{1,32}$",
        error_messages={
            "invalid": _("A queue id, or its first characters: lowercase hexadecimal (0-9, a-f).")
        },
    )
    since = forms.DateTimeField(
        label=_("From"),
        required=False,
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    until = forms.DateTimeField(
        label=_("Until"),
        required=False,
        input_formats=["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S"],
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["kind"].choices = [("", _("Any"))] + [  # type: ignore[attr-defined]
            (kind, label) for kind, label in EVENT_LABELS.items()
        ]

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean() or {}
        since, until = cleaned.get("since"), cleaned.get("until")
        if since and until and since >= until:
            self.add_error("until", _("The end must come after the start."))
        return cleaned
