"""The provider's signing keys (its JWKS, ``jwks_uri``) for back-channel logout tokens: kept per
issuer, fetched off the request path, and fetched again at a bounded rate (issue 40: 16
anonymous connections posting tokens with invented key ids made 120 fetches in 10 s, each on
the request thread; with the provider stalled, 3 posts held a signed-in page for 30 s).

- **Kept.** A key set serves every token until it is ``OIDC_JWKS_CACHE_SECONDS`` old; then it
  still serves while a fresh one is fetched in the background.
- **An unknown key id** fetches the set again, unless it was fetched (or tried) less than
  ``OIDC_JWKS_REFRESH_SECONDS`` ago: a provider publishes a new key before it signs with it, so
  a key id missing from a set that recent is refused without asking. Invented key ids cost the
  provider at most one fetch a period per process, whatever their number.
- **Off the request path.** Fetches run one at a time on a thread of their own, never on a
  request's thread or the process's one sync thread. A request that needs a fetch's outcome
  waits for it without holding a thread, at most ``OIDC_TIMEOUT_SECONDS``; every request that
  needs the same fetch waits for that one. A fetch that outlives its waiters still fills the
  set for the next token.
"""

import asyncio
import logging
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import jwt
from django.conf import settings
from prometheus_client import Counter

from orbit_console.signin import provider

log = logging.getLogger(__name__)

KEY_FETCHES = Counter(
    "orbit_oidc_key_fetches_total",
    "Fetches of the identity provider's signing keys (JWKS) for back-channel logout tokens, by"
    " outcome",
    ["outcome"],
)
for _outcome in ("ok", "failed"):
    KEY_FETCHES.labels(outcome=_outcome)

_fetcher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="oidc-keys")


class UnknownKey(Exception):
    """No key of the provider's set signs with this key id and algorithm."""


class KeysUnavailable(Exception):
    """The provider's keys could not be read (in time)."""


class ProviderKeys:
    """The signing keys of one issuer (read through its discovery document), as this process
    last read them: a set never verifies another issuer's tokens. ``clock``: seconds,
    monotonic (tests move it)."""

    def __init__(self, issuer: str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.issuer = issuer
        self.clock = clock
        self._lock = threading.Lock()
        self._keys: list[tuple[str | None, str | None, jwt.PyJWK]] = []  # kid, alg, key
        self._fetched_at: float | None = None
        self._tried_at: float | None = None
        self._fetch: Future[None] | None = None

    async def key_for(self, kid: str | None, alg: str) -> jwt.PyJWK:
        """The key that signs ``alg`` tokens with ``kid`` (any of the set's for ``None``)."""
        with self._lock:
            key = self._match(kid, alg)
            now = self.clock()
            if key is not None:
                age = now - self._fetched_at if self._fetched_at is not None else 0.0
                if age >= settings.OIDC_JWKS_CACHE_SECONDS:
                    self._start_fetch(now)  # for the next token; this one is served now
                return key
            fetch = self._fetch or self._start_fetch(now)
        if fetch is None:
            if self._fetched_at is None:  # the last try failed, too recently to try again
                raise KeysUnavailable("not read yet, and tried moments ago")
            raise UnknownKey("not in the key set, read moments ago")
        try:
            await asyncio.wait_for(
                asyncio.shield(asyncio.wrap_future(fetch)), timeout=settings.OIDC_TIMEOUT
            )
        except TimeoutError:
            raise KeysUnavailable("the provider's keys did not come in time") from None
        except Exception as failed:  # the fetch's own failure, logged where it happened
            raise KeysUnavailable(type(failed).__name__) from None
        with self._lock:
            key = self._match(kid, alg)
        if key is None:
            raise UnknownKey("not in the provider's key set")
        return key

    def _match(self, kid: str | None, alg: str) -> jwt.PyJWK | None:
        for key_id, key_alg, key in self._keys:
            if kid is not None and key_id != kid:
                continue
            if key_alg is not None and key_alg != alg:
                continue
            return key
        return None

    def _start_fetch(self, now: float) -> "Future[None] | None":
        """A fetch, unless one is under way (that one) or one began less than
        ``OIDC_JWKS_REFRESH_SECONDS`` ago (none). Under the lock."""
        if self._fetch is not None:
            return self._fetch
        if self._tried_at is not None and now - self._tried_at < settings.OIDC_JWKS_REFRESH_SECONDS:
            return None
        self._tried_at = now
        self._fetch = _fetcher.submit(self._read)
        return self._fetch

    def _read(self) -> None:
        """On the fetcher's thread: the discovery document (kept an hour), then the set."""
        try:
            keys = signing_keys(provider.fetch_json(provider.endpoint("jwks_uri")))
        except Exception as failed:
            KEY_FETCHES.labels(outcome="failed").inc()
            log.warning("the provider's keys could not be read: %s", failed)
            raise
        else:
            KEY_FETCHES.labels(outcome="ok").inc()
            with self._lock:
                self._keys, self._fetched_at = keys, self.clock()
        finally:
            with self._lock:
                self._fetch = None


def signing_keys(document: dict[str, Any]) -> list[tuple[str | None, str | None, jwt.PyJWK]]:
    """The signing keys of a JWKS document; a key that cannot be read (a type PyJWT does not
    know, a malformed member) is left out, not the whole set."""
    found = document.get("keys")
    keys = []
    for member in found if isinstance(found, list) else []:
        if not isinstance(member, dict) or member.get("use", "sig") != "sig":
            continue
        try:
            key = jwt.PyJWK(member)
        except (jwt.PyJWKError, jwt.InvalidKeyError, ValueError, TypeError):
            continue
        kid, alg = member.get("kid"), member.get("alg")
        keys.append(
            (kid if isinstance(kid, str) else None, alg if isinstance(alg, str) else None, key)
        )
    return keys


_by_issuer: dict[str, ProviderKeys] = {}
_by_issuer_lock = threading.Lock()


def of_issuer(issuer: str) -> ProviderKeys:
    """This process's keys of ``issuer``."""
    with _by_issuer_lock:
        keys = _by_issuer.get(issuer)
        if keys is None:
            keys = _by_issuer[issuer] = ProviderKeys(issuer)
        return keys
