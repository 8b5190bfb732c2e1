"""The two lanes a console request waits in at the edge (docs/deployment.md, "Capacity of one
replica"): signed-in people's, bounded by ``CONSOLE_MAX_IN_FLIGHT``, and the anonymous one, with
a smaller bound (``CONSOLE_ANONYMOUS_MAX_IN_FLIGHT``) and a bound per client address
(``CONSOLE_ANONYMOUS_MAX_IN_FLIGHT_PER_ADDRESS``). ``ops/middleware.LoadSheddingMiddleware``
sheds what does not fit, before any work; neither lane can take the other's places.

**Who is signed in, without the database.** The lane is chosen on the process's event loop,
before the request reaches the one sync thread (``ops/handler.py``) that reads sessions: a
decision that waited for that thread would wait behind the very requests it is meant to turn
away. So a signed-in session carries a **pass**, a second cookie (``SIGNED_IN_COOKIE``) the console
sets on the first answer after someone signs in: a timestamped HMAC, under ``SECRET_KEY``, of the
session cookie it belongs to. The edge checks it in microseconds. A session cookie without a
pass (no cookie, a forged or guessed one, the session of a browser that only started a company
sign-in) is anonymous; a pass belongs to one session key and expires with the sign-in
(``SESSION_COOKIE_AGE``). The path does not decide: the sign-in pages, company sign-in and its
callback and back-channel logout come without a pass by nature, while a signed-in person's
step-up through the provider stays in their lane.

A pass outlives its session only until that session's next answer, which takes it away. A pass
presented with a session that has ended (signed out, ended by back-channel logout, idle) is
remembered by the process as spent: a pass kept from an ended session buys at most one request
in the people's lane per process.

**Per address.** The address is ``REMOTE_ADDR``, never a header read here: behind the reverse
proxy the server takes it from the ``X-Forwarded-For`` that the proxy writes afresh (``serve
--proxy-headers``, the image's command); without that option the header is ignored. IPv6
addresses count per /64, the block one subscriber is given.
"""

import hashlib
import ipaddress
import threading
from collections import OrderedDict
from typing import Any

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.core import signing
from django.http import HttpRequest, HttpResponse
from django.utils.deprecation import MiddlewareMixin
from django.utils.functional import SimpleLazyObject

SIGNED_IN_COOKIE = "orbit_signed_in"
_SIGNED_IN_SALT = "orbit.ops.lanes.signed-in"
# Passes seen with a session that had ended, kept per process (the oldest go first).
_SPENT_KEPT = 10_000
_spent: OrderedDict[str, None] = OrderedDict()
_spent_lock = threading.Lock()

PEOPLE = "people"
ANONYMOUS = "anonymous"
# Why a request was turned away: its lane was full, or its address had its share of it.
BOUND = "bound"
ADDRESS = "address"


# --- The signed-in pass -----------------------------------------------------------------------


def _digest(session_key: str) -> str:
    return hashlib.sha256(session_key.encode()).hexdigest()[:32]


def make_pass(session_key: str) -> str:
    return signing.TimestampSigner(salt=_SIGNED_IN_SALT).sign(_digest(session_key))


def _pass_of(presented: str | None, session_key: str | None) -> bool:
    """Whether ``presented`` is a pass this console made for ``session_key``, in the sign-in's
    lifetime (spent or not)."""
    if not presented or not session_key:
        return False
    try:
        named = signing.TimestampSigner(salt=_SIGNED_IN_SALT).unsign(
            presented, max_age=settings.SESSION_COOKIE_AGE
        )
    except signing.BadSignature:
        return False
    return named == _digest(session_key)


def carries_pass(request: HttpRequest) -> bool:
    """Whether the request comes with the valid, unspent pass of its session cookie."""
    presented = request.COOKIES.get(SIGNED_IN_COOKIE)
    if not presented or presented in _spent:
        return False
    return _pass_of(presented, request.COOKIES.get(settings.SESSION_COOKIE_NAME))


def _spend(presented: str) -> None:
    with _spent_lock:
        _spent[presented] = None
        while len(_spent) > _SPENT_KEPT:
            _spent.popitem(last=False)


class SignedInPassMiddleware(MiddlewareMixin):
    """Keeps the pass in step with the session, on the answers of requests that looked at who
    is signed in (every page does): given when the answer's session is signed in and carries none
    of its own (after signing in, after a rotation of ``SECRET_KEY``), taken away — and spent —
    when it is not signed in (signed out, ended, expired)."""

    def process_response(self, request: HttpRequest, response: HttpResponse) -> HttpResponse:
        session = getattr(request, "session", None)
        signed_in = _signed_in_as_read(request)
        if session is None or signed_in is None:
            return response
        presented = request.COOKIES.get(SIGNED_IN_COOKIE)
        key = session.session_key
        if signed_in and key:
            if not _pass_of(presented, key):
                response.set_cookie(
                    SIGNED_IN_COOKIE,
                    make_pass(key),
                    httponly=True,
                    samesite="Lax",
                    secure=settings.SESSION_COOKIE_SECURE,
                    path=settings.SESSION_COOKIE_PATH,
                    domain=settings.SESSION_COOKIE_DOMAIN,
                )
        elif presented is not None:
            if _pass_of(presented, request.COOKIES.get(settings.SESSION_COOKIE_NAME)):
                _spend(presented)
            response.delete_cookie(
                SIGNED_IN_COOKIE,
                samesite="Lax",
                path=settings.SESSION_COOKIE_PATH,
                domain=settings.SESSION_COOKIE_DOMAIN,
            )
        return response


def _signed_in_as_read(request: HttpRequest) -> bool | None:
    """Whether the request's session is signed in, from what the request already read of it;
    ``None`` when it read nothing. Nothing is read from the database here: the answer of a
    request whose database failed must not try again."""
    user = getattr(request, "user", None)
    if user is not None and not isinstance(user, SimpleLazyObject):
        return bool(user.is_authenticated)  # set by login(), logout(), the console's views
    # AuthenticationMiddleware's lazy user, once read (``request.user`` or ``request.auser()``)
    read = getattr(request, "_cached_user", getattr(request, "_acached_user", None))
    if read is not None:
        return bool(read.is_authenticated)
    session = getattr(request, "session", None)
    if session is not None and hasattr(session, "_session_cache"):  # loaded by the request
        return SESSION_KEY in session
    return None


# --- Lanes ------------------------------------------------------------------------------------


def client_address(request: HttpRequest) -> str:
    """The client's address as the server was given it (``REMOTE_ADDR``); IPv6 per /64."""
    raw = str(request.META.get("REMOTE_ADDR") or "")
    try:
        address = ipaddress.ip_address(raw)
    except ValueError:
        return raw[:64]
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.IPv6Network((address, 64), strict=False))
    return str(address)


class Lane:
    """At most ``limit`` requests at once (0: no bound), at most ``per_address`` of them from
    one address (0: no bound per address). Thread-safe: the edge's event loop and a
    synchronous stack share it."""

    def __init__(self, name: str, *, limit: int, per_address: int = 0, gauge: Any = None) -> None:
        self.name = name
        self.limit = limit
        self.per_address = per_address
        self.in_flight = 0
        self.by_address: dict[str, int] = {}
        self._gauge = gauge
        self._lock = threading.Lock()

    def enter(self, address: str) -> str | None:
        """``None``: the request is in and must ``leave``; else why it is not (``ADDRESS``,
        ``BOUND``)."""
        address = address if self.per_address else ""
        with self._lock:
            if self.per_address and self.by_address.get(address, 0) >= self.per_address:
                return ADDRESS
            if self.limit and self.in_flight >= self.limit:
                return BOUND
            self.in_flight += 1
            self.by_address[address] = self.by_address.get(address, 0) + 1
            self._show()
        return None

    def leave(self, address: str) -> None:
        address = address if self.per_address else ""
        with self._lock:
            self.in_flight -= 1
            left = self.by_address[address] - 1
            if left:
                self.by_address[address] = left
            else:
                del self.by_address[address]
            self._show()

    def _show(self) -> None:
        if self._gauge is not None:
            self._gauge.set(self.in_flight)
