"""The test run's settings: the project's own, but test-only people's passwords are hashed
with a fast hasher.

Argon2id costs about 0.2 s of CPU per hash and per check here (0.7 s under the suite's load),
and the suite makes and signs in thousands of people; MD5 costs microseconds. It comes first, so
people made by the tests get it and keep it (Django upgrades a hash only to the first hasher).
The tests of signing in and of hashing (``tests/ops/test_signin.py``) run their servers on
``orbit_console.settings`` and make their people with Argon2, as production does. Every child
process of the run (servers, ``manage.py``) inherits ``DJANGO_SETTINGS_MODULE`` and so this
module, unless a test says otherwise.
"""

from orbit_console.settings import *  # noqa: F403
from orbit_console.settings import PASSWORD_HASHERS as PRODUCTION_PASSWORD_HASHERS

PASSWORD_HASHERS = [
    "django.contrib.auth.hashers.MD5PasswordHasher",
    *PRODUCTION_PASSWORD_HASHERS,
]
