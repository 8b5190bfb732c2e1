"""A per-checkout secret for local use, so that a fresh clone runs without configuration.

Production sets ``SECRET_KEY`` (and ``ORBIT_ENV=production`` makes it mandatory). Locally the
key is generated once into the git-ignored ``var/`` folder and shared by every process of the
checkout (the demo server, the test servers, management commands), so sessions and encrypted
tokens survive restarts.
"""

import os
import secrets
from pathlib import Path


def local_secret(path: Path, nbytes: int = 50) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text().strip()
    with os.fdopen(fd, "w") as handle:
        value = secrets.token_urlsafe(nbytes)
        handle.write(value)
    return value
