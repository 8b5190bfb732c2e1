"""``{% evidence_ref reference namespace_id %}``: the reference, as a link where its namespace's
policy makes one (decisions/evidence.py), else as text."""

from django import template
from django.utils.html import format_html

from orbit_console.decisions.evidence import evidence_link

register = template.Library()


@register.simple_tag
def evidence_ref(reference: str, namespace_id: str) -> str:
    if not reference:
        return format_html('<span class="muted">{}</span>', "—")
    url = evidence_link(namespace_id, reference)
    if not url:
        return format_html('<span class="mono">{}</span>', reference)
    return format_html(
        '<a class="mono evidence-link" href="{}" rel="noopener noreferrer">{}</a>', url, reference
    )
