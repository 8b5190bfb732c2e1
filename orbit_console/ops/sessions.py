"""Django's database sessions, read with one plain query.

Every console page reads its session (and the signed-in user, ``console/backends.py``); through
the ORM that is half a millisecond of CPU each on a small server (docs/performance.md). Writing
sessions, expiry and everything else is Django's own ``db`` backend.

    SESSION_ENGINE = "orbit_console.ops.sessions"
"""

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.sessions.backends import db
from django.contrib.sessions.models import Session
from django.utils import timezone

from orbit_console.lib.rows import Rows

_SESSIONS = Rows(Session)


class SessionStore(db.SessionStore):
    def _get_session_from_db(self) -> Any:
        key = self.session_key
        session = None
        if key is not None:
            now = _SESSIONS.connection.ops.adapt_datetimefield_value(timezone.now())
            session = _SESSIONS.one("session_key = %s AND expire_date > %s", [key, now])
        if session is None:
            self._session_key = None
        return session

    async def _aget_session_from_db(self) -> Any:
        return await sync_to_async(self._get_session_from_db)()
