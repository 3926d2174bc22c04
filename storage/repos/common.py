"""Shared by every repository: the duplicate-key error and the dialect's INSERT … ON CONFLICT."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session


class DuplicateError(Exception):
    """A row with the same unique key exists already."""


def dialect_insert(session: Session, table: Any) -> Any:
    """The dialect's INSERT, which has ON CONFLICT DO NOTHING on SQLite and PostgreSQL alike."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise ValueError(f"unsupported dialect {dialect}")  # pragma: no cover - only SQLite and PostgreSQL
