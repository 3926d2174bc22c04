"""The catalog's errors: a malformed manifest, and a `run` command that does not fit the catalog."""

from __future__ import annotations

from bot.grammar import CommandError


class CatalogError(Exception):
    """A manifest is malformed; the message names the file and the field."""

    def __init__(self, file: str, field: str, message: str) -> None:
        super().__init__(f"{file}: {field}: {message}")
        self.file = file
        self.field = field
        self.message = message


class PlanError(CommandError):
    """A `run` command does not fit the catalog (names, keys, types, bounds, pins)."""
