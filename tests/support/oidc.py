"""A real OpenID Connect provider for the sign-in tests: panva's certified ``oidc-provider`` on
the machine's Node.js (``tests/support/oidc/provider.mjs``, its version pinned by the committed
``package-lock.json``).

As with Chromium (``tests/support/chromium.py``) and the deployment tools
(``tests/support/tools.py``): off CI, a machine without Node.js or without the provider
installed skips the tests that need it, and the run ends with one line saying how to get it;
under CI (``CI`` set) a missing provider fails the run.
"""

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any, BinaryIO

import httpx
import pytest

from tests.support.servers import LOG_DIR, LoggedProcess, free_port, wait_answering

HERE = Path(__file__).parent / "oidc"
HOW_TO_GET = (
    "install Node.js 18 or later ('apt-get install nodejs npm') and the test provider "
    "('npm ci --prefix tests/support/oidc')"
)


def node() -> str:
    """The path of ``node`` with the provider installed; skips the calling test without them
    (fails under CI)."""
    path = shutil.which("node")
    installed = (HERE / "node_modules" / "oidc-provider" / "package.json").exists()
    if path and installed:
        return path
    message = f"no OpenID Connect provider: {HOW_TO_GET}"
    if os.environ.get("CI"):
        pytest.fail(f"CI is set and {message}")
    pytest.skip(message)


class OidcProvider(LoggedProcess):
    """One provider process on a port of its own; ``clients`` is oidc-provider's client
    metadata (``client_id``, ``client_secret``, ``redirect_uris``, ...)."""

    def __init__(self, *, groups_in_id_token: bool = False) -> None:
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.groups_in_id_token = groups_in_id_token
        self.process: subprocess.Popen[bytes] | None = None
        self._log: BinaryIO | None = None
        LOG_DIR.mkdir(parents=True, exist_ok=True)
        self.log_path = LOG_DIR / f"oidc-provider-{self.port}-{os.getpid()}.log"

    def start(self, clients: list[dict[str, Any]]) -> "OidcProvider":
        executable = node()
        env = {
            **os.environ,
            "OIDC_PORT": str(self.port),
            "OIDC_CLIENTS": json.dumps(clients),
            "OIDC_GROUPS_IN_ID_TOKEN": "1" if self.groups_in_id_token else "0",
        }
        self._log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [executable, str(HERE / "provider.mjs")],
            cwd=HERE,
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
        )
        try:
            wait_answering(self.discovery_url, self.process, 60, interval=0.1)
        except AssertionError as failed:
            raise RuntimeError(
                f"the OpenID Connect provider: {failed}; see {self.log_path}"
            ) from None
        return self

    @property
    def discovery_url(self) -> str:
        return f"{self.issuer}/.well-known/openid-configuration"

    # What the identity team does at the provider.
    def set_account(
        self,
        sub: str,
        *,
        groups: list[str] | None = None,
        disabled: bool | None = None,
        claims: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``claims`` go over the provider's defaults for the person (``preferred_username``
        is the ``sub``, ``email`` ``sub@example.com``, ``email_verified`` true); ``None`` for a
        claim leaves it out."""
        body: dict[str, Any] = {}
        if groups is not None:
            body["groups"] = groups
        if disabled is not None:
            body["disabled"] = disabled
        if claims is not None:
            body["claims"] = claims
        done = httpx.put(f"{self.issuer}/test/accounts/{sub}", json=body, timeout=10)
        done.raise_for_status()
        return dict(done.json())

    def backchannel_logout(self, sub: str) -> list[dict[str, Any]]:
        """Send every client a logout token for ``sub``'s sessions; what each answered."""
        done = httpx.post(f"{self.issuer}/test/backchannel/{sub}", timeout=30)
        done.raise_for_status()
        return list(done.json()["sent"])

    def sign(self, claims: dict[str, Any], *, typ: str | None = None) -> str:
        """A JWT of ``claims`` signed with the provider's own key."""
        done = httpx.post(f"{self.issuer}/test/sign", json={"claims": claims, "typ": typ})
        done.raise_for_status()
        return str(done.json()["token"])
