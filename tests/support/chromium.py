"""Finding a Chromium for the browser tests.

The README's ``uv run pytest`` must pass on a machine that has Python and uv and nothing else:
there the browser tests are skipped with one line that says how to get a browser. Under CI
(``CI`` set) a missing browser is an error, so a CI machine can never go green without them.
"""

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

SYSTEM_NAMES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
HOW_TO_GET_ONE = (
    "no Chromium found (looked for "
    + ", ".join(SYSTEM_NAMES)
    + " and Playwright's own browsers): install one with 'apt-get install chromium' "
    "or 'uv run playwright install chromium'"
)


@dataclass(frozen=True)
class Chromium:
    """A browser to launch: a system executable, or ``None`` for the one Playwright installed."""

    executable_path: str | None


def playwright_browsers_dir() -> Path:
    configured = os.environ.get("PLAYWRIGHT_BROWSERS_PATH")
    if configured and configured != "0":
        return Path(configured)
    return Path.home() / ".cache" / "ms-playwright"


def find_chromium() -> Chromium | None:
    for name in SYSTEM_NAMES:
        if path := shutil.which(name):
            return Chromium(executable_path=path)
    browsers = playwright_browsers_dir()
    # Playwright's own layout: chromium-<rev>/chrome-linux*/chrome, or the headless shell.
    if any(browsers.glob("chromium*/chrome-*/chrome")) or any(
        browsers.glob("chromium_headless_shell-*/chrome-*/*headless_shell")
    ):
        return Chromium(executable_path=None)
    return None
