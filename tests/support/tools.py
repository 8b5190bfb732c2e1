"""Finding the system tools the deployment tests run: ``kubectl`` (its ``kustomize``),
``promtool``, ``yamllint``, ``openssl`` (the walkthrough's keys), and ``mariadbd`` for the
database switchover's pair.

As with Chromium (``tests/support/chromium.py``): the README's ``uv run pytest`` must pass on a
machine with Python and uv only, so off CI a missing tool skips the tests that need it, and the
run ends with one line per tool saying how to get it; under CI (``CI`` set) a missing tool fails
the run, so CI cannot go green without checking the deployment files.
"""

import functools
import json
import os
import re
import shutil
import subprocess

import pytest

HOW_TO_GET = {
    "kubectl": "install kubectl 1.27 or later, whose kustomize (v5) renders components "
    "(Debian: 'apt-get install kubernetes-client', where its version is recent enough)",
    "promtool": "install promtool (Debian: 'apt-get install prometheus')",
    "yamllint": "install yamllint (Debian: 'apt-get install yamllint')",
    "openssl": "install openssl (Debian: 'apt-get install openssl')",
    "mariadbd": "install the MariaDB server, whose mariadbd and mariadb-install-db make a "
    "primary and its replica (Debian: 'apt-get install mariadb-server')",
}
# The oldest kustomize that renders deploy/kubernetes (components, labels, patches by target).
KUSTOMIZE_MAJOR = 5


def tool(name: str) -> str:
    """The path of ``name``; skips the calling test without it (fails under CI)."""
    path = shutil.which(name)
    if path and (name != "kubectl" or kustomize_major(path) >= KUSTOMIZE_MAJOR):
        return path
    message = f"no {name} found: {HOW_TO_GET[name]}"
    if path:
        message = f"{path}'s kustomize is too old: {HOW_TO_GET[name]}"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {message}")
    pytest.skip(message)


@functools.cache
def kustomize_major(kubectl: str) -> int:
    """The major version of the kustomize built into ``kubectl`` (0 when it does not say)."""
    done = subprocess.run(
        [kubectl, "version", "--client", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    try:
        version = json.loads(done.stdout).get("kustomizeVersion", "")
    except ValueError:
        return 0
    found = re.match(r"v(\d+)", version)
    return int(found.group(1)) if found else 0
