"""Evidence that links: a namespace's rule for evidence references and the link each one
makes (docs/notifications.md, "Evidence that links").

An administrator's pattern is matched by RE2 (``lib/patterns.py``), in time linear in the
reference, and a reference longer than the recovery API takes (C10: 512 characters) is never
matched at all: whatever the pattern, checking a reference or making its link is bounded
(issue 41: ``(a+)+`` held a proposal's page for seconds).
"""

from collections.abc import Collection
from urllib.parse import quote, urlsplit

from django.db import transaction
from django.utils import timezone

from orbit_console.decisions.models import EvidencePolicy
from orbit_console.lib.patterns import Pattern, PatternRefused, linear
from orbit_console.lib.recovery_rules import MAX_EVIDENCE_REF_CHARS, RuleError, check_evidence_ref

MAX_PATTERN_CHARS = EvidencePolicy._meta.get_field("pattern").max_length or 200
MAX_EXAMPLE_CHARS = EvidencePolicy._meta.get_field("example").max_length or 200
MAX_LINK_CHARS = EvidencePolicy._meta.get_field("link_template").max_length or 500


class PolicyRefused(Exception):
    """The policy cannot be saved as asked; the message says why."""


def compiled(policy: EvidencePolicy) -> Pattern | None:
    """The policy's pattern as RE2 matches it. None for one RE2 cannot express, stored before
    patterns were RE2's: such a policy checks nothing (``evidence show`` says so)."""
    try:
        return linear(policy.pattern)
    except PatternRefused:
        return None


def link_for(policy: EvidencePolicy, reference: str) -> str:
    """The link ``reference`` makes under ``policy``; "" when it does not match or none is set."""
    pattern = compiled(policy) if policy.link_template else None
    if pattern is None or len(reference) > MAX_EVIDENCE_REF_CHARS:
        return ""
    found = pattern.fullmatch(reference)
    if found is None:
        return ""
    groups = [quote(group or "", safe="") for group in found.groups()]
    try:
        url = policy.link_template.format(quote(found.group(0), safe=""), *groups)
    except (IndexError, KeyError, ValueError):
        return ""
    return url if urlsplit(url).scheme in ("http", "https") else ""


def matches(policy: EvidencePolicy, reference: str) -> bool:
    """Whether ``reference`` is one the policy takes: at most as long as the recovery API
    takes (C10), and matched whole by the pattern."""
    if len(reference) > MAX_EVIDENCE_REF_CHARS:
        return False
    pattern = compiled(policy)
    return pattern is None or pattern.fullmatch(reference) is not None


def policy_for(namespace_id: str) -> EvidencePolicy | None:
    return EvidencePolicy.objects.filter(namespace_id=namespace_id).first()


def evidence_link(namespace_id: str, reference: str) -> str:
    policy = policy_for(namespace_id) if reference else None
    return link_for(policy, reference) if policy is not None else ""


@transaction.atomic
def evidence_policy_set(
    *,
    namespace_id: str,
    pattern: str,
    example: str,
    link_template: str = "",
    replacing: Collection[str] = (),
) -> EvidencePolicy:
    """Set the namespace's policy: the pattern must be one RE2 matches (in linear time) and the
    example match it, and a link template must make an http(s) link of the example.
    ``replacing``: keys the same policy was stored under by mistake (the namespace's name,
    issue 41), removed with it."""
    for what, text, most in (
        ("the pattern", pattern, MAX_PATTERN_CHARS),
        ("the example", example, MAX_EXAMPLE_CHARS),
        ("the link template", link_template, MAX_LINK_CHARS),
    ):
        if len(text) > most:
            raise PolicyRefused(f"{what} is {len(text)} characters long: at most {most}")
    try:
        linear(pattern)
    except PatternRefused as error:
        raise PolicyRefused(str(error)) from None
    try:
        check_evidence_ref(example)
    except RuleError as error:
        raise PolicyRefused(
            f"the example is no evidence reference the API takes: {error}"
        ) from None
    policy = EvidencePolicy(
        namespace_id=namespace_id,
        pattern=pattern,
        example=example,
        link_template=link_template,
        updated_at=timezone.now(),
    )
    if not matches(policy, example):
        raise PolicyRefused("the example does not match the pattern")
    if link_template and not link_for(policy, example):
        raise PolicyRefused("the link template makes no http(s) link of the example")
    EvidencePolicy.objects.filter(namespace_id__in=set(replacing) - {namespace_id}).delete()
    saved, _ = EvidencePolicy.objects.update_or_create(
        namespace_id=namespace_id,
        defaults={
            "pattern": pattern,
            "example": example,
            "link_template": link_template,
            "updated_at": policy.updated_at,
        },
    )
    return saved


def evidence_policy_clear(*, namespace_id: str, replacing: Collection[str] = ()) -> int:
    """Remove the namespace's policy and any stored under the keys ``replacing``; how many."""
    keys = {namespace_id, *replacing}
    deleted, _ = EvidencePolicy.objects.filter(namespace_id__in=keys).delete()
    return deleted
