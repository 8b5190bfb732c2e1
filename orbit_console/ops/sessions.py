"""Django's database sessions, read with one plain query, and how long a sign-in lasts.

Every console page reads its session (and the signed-in user, ``console/backends.py``); through
the ORM that is half a millisecond of CPU each on a small server (docs/performance.md). Writing
sessions and everything else is Django's own ``db`` backend.

    SESSION_ENGINE = "orbit_console.ops.sessions"

How long a session lasts (docs/console.md, "Sessions and drafts"): it ends
``SESSION_COOKIE_AGE`` after sign-in at the latest, and earlier when the person makes no request
for ``SESSION_IDLE_TIMEOUT`` seconds (0: no idle end). The database row's ``expire_date`` is the
one truth: the store keeps the end it last wrote in the session itself (``_EXPIRES``), so that
saving a session for any other reason neither extends nor shortens it, and the cookie still ends
with the browser (Django's ``set_expiry`` would give it a date).
"""

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.utils import timezone

from orbit_console.lib.rows import Rows

_SESSIONS = Rows(Session)

# Unix seconds, in the session's own data: the latest end of this sign-in, and the end the
# database row was last given.
_ENDS = "orbit.session.ends"
_EXPIRES = "orbit.session.expires"


class SessionStore(db.SessionStore):
    # The row's expiry as read from the database by this request: what the page is told.
    loaded_expiry: datetime | None = None

    def _get_session_from_db(self) -> Any:
        key = self.session_key
        session = None
        if key is not None:
            now = _SESSIONS.connection.ops.adapt_datetimefield_value(timezone.now())
            session = _SESSIONS.one("session_key = %s AND expire_date > %s", [key, now])
        if session is None:
            self._session_key = None
        else:
            self.loaded_expiry = session.expire_date
        return session

    async def _aget_session_from_db(self) -> Any:
        return await sync_to_async(self._get_session_from_db)()

    # The row's end is the one this store decided (``touch``), when it has decided one.

    def _decided_end(self, kwargs: dict[str, Any]) -> datetime | None:
        if "expiry" in kwargs:
            return None
        expires = self.get(_EXPIRES)
        return _from_unix(expires) if isinstance(expires, int | float) else None

    def get_expiry_date(self, **kwargs: Any) -> datetime:
        decided = self._decided_end(kwargs)
        return decided if decided is not None else super().get_expiry_date(**kwargs)

    async def aget_expiry_date(self, **kwargs: Any) -> datetime:
        return await sync_to_async(self.get_expiry_date)(**kwargs)

    def get_expiry_age(self, **kwargs: Any) -> int:
        decided = self._decided_end(kwargs)
        if decided is None:
            age: int = super().get_expiry_age(**kwargs)
            return age
        modification = kwargs.get("modification") or timezone.now()
        return max(0, int((decided - modification).total_seconds()))

    async def aget_expiry_age(self, **kwargs: Any) -> int:
        return await sync_to_async(self.get_expiry_age)(**kwargs)


def _from_unix(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


def idle_timeout() -> int:
    return int(settings.SESSION_IDLE_TIMEOUT)


def _granularity() -> float:
    """How far a request must move the idle end before it is written: a write per request
    would cost every page a database write (docs/performance.md); the end a page shows is the
    row's, so it is never later than the truth."""
    idle = idle_timeout()
    return max(1.0, min(60.0, idle / 10)) if idle else 0.0


def touch(session: Any, *, extend: bool = False) -> None:
    """A signed-in person made a request (or asked to stay signed in: ``extend``): the idle end
    moves to now + ``SESSION_IDLE_TIMEOUT``, never past the end of the sign-in. The first
    request of a sign-in pins that end (``SESSION_COOKIE_AGE`` after the sign-in wrote the
    row)."""
    now = timezone.now()
    ends_seconds = session.get(_ENDS)  # loads the session, and with it ``loaded_expiry``
    loaded: datetime | None = getattr(session, "loaded_expiry", None)
    if not isinstance(ends_seconds, int | float):
        signed_in_end = loaded or now + timedelta(seconds=settings.SESSION_COOKIE_AGE)
        session[_ENDS] = int(signed_in_end.timestamp())
        session[_EXPIRES] = session[_ENDS]
        ends_seconds = session[_ENDS]
        if not idle_timeout():
            return
    idle = idle_timeout()
    if not idle:
        return
    ends = _from_unix(ends_seconds)
    wanted = min(ends, now + timedelta(seconds=idle))
    current = loaded if loaded is not None else _from_unix(session.get(_EXPIRES, ends_seconds))
    moved = (wanted - current).total_seconds()
    if moved > (0 if extend else _granularity()) or moved < -_granularity():
        session[_EXPIRES] = int(wanted.timestamp())


@dataclass(frozen=True)
class Timing:
    """When a session ends, as a page is told (``console/views/session.py``)."""

    expires_at: datetime  # the row's end: the sooner of the idle end and the sign-in's end
    ends_at: datetime  # the sign-in's end, which nothing extends
    idle_seconds: int  # 0: no idle end

    @property
    def extendable(self) -> bool:
        """Whether "stay signed in" can move the end: only an idle end can be moved."""
        return self.idle_seconds > 0 and self.expires_at < self.ends_at

    @property
    def warn_seconds(self) -> int:
        """How long before the end the page warns: two minutes, or half the window when it is
        shorter."""
        window = self.idle_seconds or int(settings.SESSION_COOKIE_AGE)
        return max(1, min(120, window // 2))


def timing(session: Any) -> Timing:
    """The session's ends after this request: what its row holds, or will once saved."""
    ends_seconds = session.get(_ENDS)  # loads the session, and with it ``loaded_expiry``
    loaded: datetime | None = getattr(session, "loaded_expiry", None)
    # Saved at the end of this request, the row will hold what the store decides.
    expires = session.get_expiry_date() if session.modified or loaded is None else loaded
    ends = _from_unix(ends_seconds) if isinstance(ends_seconds, int | float) else expires
    return Timing(expires_at=expires, ends_at=max(ends, expires), idle_seconds=idle_timeout())


def session_expiry(session_key: str) -> datetime | None:
    """When the session ``session_key`` ends, if it has not (its socket's watch,
    ``ops/sockets.py``)."""
    now = _SESSIONS.connection.ops.adapt_datetimefield_value(timezone.now())
    session = _SESSIONS.one("session_key = %s AND expire_date > %s", [session_key, now])
    return None if session is None else session.expire_date


def sessions_of_user(user_id: int) -> list[str]:
    """The keys of the sessions signed in as ``user_id`` that have not ended. Django does not
    index sessions by person: each live row is decoded, as Django's own admin would (a
    console has hundreds of sessions, not millions)."""
    now = timezone.now()
    keys = []
    for session in Session.objects.filter(expire_date__gt=now).iterator():
        if str(session.get_decoded().get("_auth_user_id")) == str(user_id):
            keys.append(session.session_key)
    return keys
