"""Who a console socket belongs to: Channels' ``AuthMiddlewareStack``, except that a sign-in
hash made with a key in ``SECRET_KEY_FALLBACKS`` still counts, as it does for pages.

Channels' own ``get_user`` compares the session's hash with the current ``SECRET_KEY`` only and
flushes the session when it differs: during a rolling rotation of ``SECRET_KEY`` (docs/runbooks.md,
"Rotating credentials") every person whose session was signed in under the old key would be
signed out by the first socket they open on a replica holding the new one. Unlike a page, a
socket cannot give the browser a new cookie, so the session is left as it is (a page re-hashes
it under the current key on the person's next request) rather than re-keyed.
"""

from typing import Any

from channels.auth import AuthMiddleware
from channels.db import database_sync_to_async
from channels.sessions import CookieMiddleware, SessionMiddleware
from django.conf import settings
from django.contrib.auth import (
    BACKEND_SESSION_KEY,
    HASH_SESSION_KEY,
    SESSION_KEY,
    get_user_model,
    load_backend,
)
from django.contrib.auth.models import AnonymousUser
from django.utils.crypto import constant_time_compare


def _hash_holds(user: Any, session_hash: str) -> bool:
    """Whether ``session_hash`` is the user's sign-in hash under SECRET_KEY or a fallback."""
    if constant_time_compare(session_hash, user.get_session_auth_hash()):
        return True
    return any(
        constant_time_compare(session_hash, fallback)
        for fallback in user.get_session_auth_fallback_hash()
    )


@database_sync_to_async
def get_user(scope: dict[str, Any]) -> Any:
    session = scope["session"]
    user = None
    try:
        user_id = get_user_model()._meta.pk.to_python(session[SESSION_KEY])
        backend_path = session[BACKEND_SESSION_KEY]
    except KeyError:
        pass
    else:
        if backend_path in settings.AUTHENTICATION_BACKENDS:
            user = load_backend(backend_path).get_user(user_id)
            if user is not None and hasattr(user, "get_session_auth_hash"):
                session_hash = session.get(HASH_SESSION_KEY)
                if not session_hash or not _hash_holds(user, session_hash):
                    session.flush()
                    user = None
    return user or AnonymousUser()


class FallbackAuthMiddleware(AuthMiddleware):
    async def resolve_scope(self, scope: dict[str, Any]) -> None:
        scope["user"]._wrapped = await get_user(scope)


def SessionAuthStack(inner: Any) -> Any:
    return CookieMiddleware(SessionMiddleware(FallbackAuthMiddleware(inner)))
