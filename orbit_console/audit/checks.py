"""The audit app's start-up check: the checkpoint keys are read at start-up, so that a bad key
stops the process before the first checkpoint rather than failing it (audit/signing.py)."""

from typing import Any

from django.core.checks import CheckMessage, Error, Tags, register
from django.core.exceptions import ImproperlyConfigured

from orbit_console.audit import signing


@register(Tags.security)
def audit_signing_keys(app_configs: Any, **kwargs: Any) -> list[CheckMessage]:
    try:
        signing.check()
    except ImproperlyConfigured as error:
        return [Error(str(error), id="orbit.E002")]
    return []
