"""Who is signed in, read with one plain query with their roles and credentials
(``people.user_with_person``): Django's ``ModelBackend`` in every other way.

Every console request resolves its user from the session and then the person; through the ORM
that was three queries and half a millisecond of CPU each on a small server
(docs/performance.md).
"""

from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.models import User

from orbit_console.people.person import user_with_person


class PeopleBackend(ModelBackend):
    def get_user(self, user_id: Any) -> User | None:
        try:
            key = int(user_id)
        except (TypeError, ValueError):
            return None
        user = user_with_person(key)
        return user if user is not None and self.user_can_authenticate(user) else None

    async def aget_user(self, user_id: Any) -> User | None:
        return await sync_to_async(self.get_user)(user_id)
