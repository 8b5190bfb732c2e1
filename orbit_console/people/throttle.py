"""Sign-in throttling: three allowances of failed sign-ins within ``AXES_COOLOFF_TIME``.

django-axes counts failed sign-ins (only real failures: a wrong password or an unknown user
name) and refuses sign-in while a count is used up. It applies one limit to the largest of its
counts; the console keeps three, each with its own allowance:

- one user name from one address: ``AXES_FAILURE_LIMIT`` (guessing one person's password);
- one user name from any address: ``AXES_USERNAME_FAILURE_LIMIT`` (the same, spread over
  many addresses);
- one address, whatever the user names: ``AXES_ADDRESS_FAILURE_LIMIT`` (password spraying:
  one password tried against many people).

Only password sign-ins are counted and refused: an authentication without a password (company
sign-in's callback, which brings a code the provider issued after its own checks) is none of
axes' business — a held or refused company sign-in is no guess, and counted by address it locked
everyone behind the same proxy out. Typing one's password again before deciding has a throttle
of its own, the person's (``signin/confirmations.py``).

The counts follow ``AXES_LOCKOUT_PARAMETERS`` in that order. Which allowance ran out is kept
on the request, so that the page can say why (``console/locked_out.html``). A successful
sign-in forgets only its own user name's failures from its own address: one valid account must
not wipe an address's record of spraying, nor a name's record of guesses from elsewhere.
"""

from typing import Any

from axes.handlers.database import AxesDatabaseHandler
from django.conf import settings
from django.db.models import Sum
from django.http import HttpRequest

PAIR, USERNAME, ADDRESS = "pair", "username", "address"


class ThrottleHandler(AxesDatabaseHandler):
    def is_whitelisted(
        self, request: HttpRequest, credentials: dict[str, Any] | None = None
    ) -> bool:
        if not (credentials or {}).get("password"):
            return True
        return bool(super().is_whitelisted(request, credentials))

    def get_failures(self, request: HttpRequest, credentials: dict[str, Any] | None = None) -> int:
        """The count axes compares with ``AXES_FAILURE_LIMIT``: the pair's own, or the limit
        itself when the user name or the address has used up its own allowance."""
        counts = [
            attempts.aggregate(total=Sum("failures_since_start"))["total"] or 0
            for attempts in self.get_user_attempts(request, credentials)
        ]
        pair, username, address = counts
        allowances = (
            (PAIR, pair, settings.AXES_FAILURE_LIMIT),
            (USERNAME, username, settings.AXES_USERNAME_FAILURE_LIMIT),
            (ADDRESS, address, settings.AXES_ADDRESS_FAILURE_LIMIT),
        )
        for kind, failures, allowance in allowances:
            if failures >= allowance:
                request.orbit_lockout = kind  # type: ignore[attr-defined]
                return max(pair, settings.AXES_FAILURE_LIMIT)
        return pair

    def reset_user_attempts(
        self, request: HttpRequest, credentials: dict[str, Any] | None = None
    ) -> int:
        pair, *_others = self.filter_user_attempts(request, credentials)
        count, _ = pair.delete()
        return count
