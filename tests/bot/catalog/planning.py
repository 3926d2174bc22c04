"""Plan a command line as a user types it."""

from __future__ import annotations

from bot.catalog import Catalog, Plan
from bot.grammar import RunCommand, parse_command


def plan(catalog: Catalog, text: str, **kwargs: bool) -> Plan:
    """Parse and plan one command line."""
    command = parse_command(text)
    assert isinstance(command, RunCommand)
    return catalog.plan(command, **kwargs)
