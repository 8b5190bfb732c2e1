"""Evidence that links: a namespace's rule for evidence references and the link each one
makes (docs/notifications.md, "Evidence that links")."""

import re
from collections.abc import Collection
from urllib.parse import quote, urlsplit

from django.db import transaction
from django.utils import timezone

from orbit_console.decisions.models import EvidencePolicy


class PolicyRefused(Exception):
    """The policy cannot be saved as asked; the message says why."""


def link_for(policy: EvidencePolicy, reference: str) -> str:
    """The link ``reference`` makes under ``policy``; "" when it does not match or none is set."""
    if not policy.link_template:
        return ""
    try:
        found = re.fullmatch(policy.pattern, reference)
    except re.error:
        return ""
    if found is None:
        return ""
    groups = [quote(group or "", safe="") for group in found.groups()]
    try:
        url = policy.link_template.format(quote(found.group(0), safe=""), *groups)
    except (IndexError, KeyError, ValueError):
        return ""
    return url if urlsplit(url).scheme in ("http", "https") else ""


def matches(policy: EvidencePolicy, reference: str) -> bool:
    try:
        return re.fullmatch(policy.pattern, reference) is not None
    except re.error:
        return False


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
    """Set the namespace's policy: the pattern must compile and the example match it, and a
    link template must make an http(s) link of the example. ``replacing``: keys the same
    policy was stored under by mistake (the namespace's name, issue 41), removed with it."""
    try:
        re.compile(pattern)
    except re.error as error:
        raise PolicyRefused(f"not a regular expression: {error}") from error
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
