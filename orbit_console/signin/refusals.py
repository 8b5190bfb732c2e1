"""What the provider says when it answers with an error instead of a code (RFC 6749 4.1.2.1,
OpenID Connect Core 3.1.2.6): for the log, its ``error`` and ``error_description`` as it sent
them (cut, control characters escaped: anyone can make such a link); for the person, what kind
of refusal it is and whom to ask, with a reference that finds the log line.

A code is shown to the person only when it is one the standards define: the description,
and a code nobody defined, are text anyone can put in a link to the console's callback, so the
page never repeats them."""

import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field

# What the people who run the provider must change: the person can only ask.
ACCESS = "access"
# The console's settings and the provider's disagree: the console's administrator fixes it.
SETTINGS = "settings"
# The provider is having trouble: try again later.
TROUBLE = "trouble"
# The provider needed to show a page and was asked not to: sign in again.
INTERACTION = "interaction"

KINDS = {
    "access_denied": ACCESS,
    "unmet_authentication_requirements": ACCESS,
    "invalid_request": SETTINGS,
    "unauthorized_client": SETTINGS,
    "unsupported_response_type": SETTINGS,
    "invalid_scope": SETTINGS,
    "invalid_client": SETTINGS,
    "invalid_request_uri": SETTINGS,
    "invalid_request_object": SETTINGS,
    "request_not_supported": SETTINGS,
    "request_uri_not_supported": SETTINGS,
    "registration_not_supported": SETTINGS,
    "server_error": TROUBLE,
    "temporarily_unavailable": TROUBLE,
    "login_required": INTERACTION,
    "interaction_required": INTERACTION,
    "consent_required": INTERACTION,
    "account_selection_required": INTERACTION,
}

MAX_LOGGED = 300


@dataclass(frozen=True)
class Refusal:
    error: str  # as sent (cut)
    description: str  # as sent (cut); never shown to the person
    reference: str = field(default_factory=lambda: secrets.token_hex(4))

    @property
    def known(self) -> bool:
        return self.error in KINDS

    @property
    def kind(self) -> str:
        return KINDS.get(self.error, SETTINGS)

    def __str__(self) -> str:
        return (
            f"error={self.error!r} error_description={self.description!r} "
            f"(reference {self.reference})"
        )


def of(query: Mapping[str, str]) -> Refusal:
    """The refusal in the callback's query (``request.GET``)."""
    return Refusal(
        error=str(query.get("error", ""))[:MAX_LOGGED],
        description=str(query.get("error_description", ""))[:MAX_LOGGED],
    )
