"""Finding the system tools the deployment tests run: ``kubectl`` (its ``kustomize``) and
``promtool``.

As with Chromium (``tests/support/chromium.py``): the README's ``uv run pytest`` must pass on a
machine with Python and uv only, so off CI a missing tool skips the tests that need it, and the
run ends with one line per tool saying how to get it; under CI (``CI`` set) a missing tool fails
the run, so CI cannot go green without checking the deployment files.
"""

import os
import shutil

import pytest

HOW_TO_GET = {
    "kubectl": "install kubectl (Debian: 'apt-get install kubernetes-client')",
    "promtool": "install promtool (Debian: 'apt-get install prometheus')",
}
# The tools found missing in this run, with how many tests skipped for each.
missing: dict[str, int] = {}


def tool(name: str) -> str:
    """The path of ``name``; skips the calling test without it (fails under CI)."""
    if path := shutil.which(name):
        return path
    message = f"no {name} found: {HOW_TO_GET[name]}"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {message}")
    missing[name] = missing.get(name, 0) + 1
    pytest.skip(message)


def summary_lines() -> list[str]:
    return [
        f"{count} deployment test{'s' if count > 1 else ''} skipped: no {name} found: "
        f"{HOW_TO_GET[name]}"
        for name, count in sorted(missing.items())
    ]
