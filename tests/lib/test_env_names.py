"""CONSOLE_NAMESPACE_NAMES and CONSOLE_ACTOR_NAMES (issue 30): ids to readable names, read
strictly so that a mistyped deployment fails at start-up."""

import pytest
from django.core.exceptions import ImproperlyConfigured

from orbit_console.lib.env import env_names

ID = "0a" * 16


def test_names_map_ids_to_trimmed_names(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEST_NAMES", f'{{"{ID}": "  Payments (EU) "}}')
    assert env_names("TEST_NAMES") == {ID: "Payments (EU)"}


def test_no_names_when_unset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEST_NAMES", raising=False)
    assert env_names("TEST_NAMES") == {}


@pytest.mark.parametrize(
    "value",
    [
        "not json",
        f'["{ID}"]',
        '{"ABC": "upper and short"}',
        f'{{"{ID.upper()}": "capitals"}}',
        f'{{"{ID}": ""}}',
        f'{{"{ID}": 7}}',
    ],
)
def test_bad_names_fail_at_start_up(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("TEST_NAMES", value)
    with pytest.raises(ImproperlyConfigured, match="TEST_NAMES"):
        env_names("TEST_NAMES")
