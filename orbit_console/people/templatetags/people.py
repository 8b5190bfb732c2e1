"""Naming people in pages: ``{{ user|named }}`` is the account's name, followed by a mark in the
reader's language when company sign-in made the account — so that ``supervisor`` and a company
person whose name only looks like it are never shown alike (docs/sign-in.md)."""

from collections.abc import Collection, Iterable

from django import template
from django.contrib.auth.models import User
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString
from django.utils.translation import gettext as _

from orbit_console.people.accounts import is_company

register = template.Library()


def company_mark(name: str, company: bool) -> SafeString:
    if not company:
        return format_html("{}", name)
    return format_html(
        '{} <span class="flag company" title="{}">{}</span>',
        name,
        _("signs in with the company's identity provider"),
        _("company"),
    )


@register.filter
def named(user: User | None) -> SafeString:
    if user is None:
        return format_html("")
    return company_mark(user.get_username(), is_company(user))


@register.filter
def named_in(name: str, company: Collection[str]) -> SafeString:
    """A name already read as text (an explorer row's) with its mark when it is one of
    ``company``'s."""
    return company_mark(name, name in company)


@register.filter
def all_named_in(names: Iterable[str], company: Collection[str]) -> SafeString:
    """Names, each with its mark, separated by commas."""
    return format_html_join(", ", "{}", ((named_in(name, company),) for name in names))
