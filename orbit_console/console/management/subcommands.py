"""Subcommands of ``manage.py console`` that apps above the console add: each registers its own
when it is ready (``console objective`` is insight's), and the command offers it beside its own,
so that an administrator finds every per-namespace setting of the console under one command
without the console importing the apps that own them (docs/architecture.md)."""

from argparse import ArgumentParser
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from django.core.management.base import BaseCommand


@dataclass(frozen=True)
class Subcommand:
    name: str
    help: str
    add_arguments: Callable[[ArgumentParser], None]
    handle: Callable[[BaseCommand, dict[str, Any]], None]


_added: dict[str, Subcommand] = {}


def add_subcommand(subcommand: Subcommand) -> None:
    """Offer ``subcommand`` as ``manage.py console NAME`` (an app's ``ready``; once per name)."""
    _added[subcommand.name] = subcommand


def added() -> dict[str, Subcommand]:
    return dict(sorted(_added.items()))
