"""Shared by every repository: the duplicate-key error and the dialect's INSERT … ON CONFLICT (once, or replacing)."""

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


def insert_once(session: Session, table: Any, values: dict[str, Any], *, keys: list[str]) -> int | None:
    """INSERT … ON CONFLICT (keys) DO NOTHING, committed: the new row's id, or None when the key was taken.

    Two concurrent writers are race-free: exactly one row, and the loser gets None rather than an
    IntegrityError. RETURNING tells the winner apart portably (rowcount is unreliable once the cursor is closed).
    """
    stmt = dialect_insert(session, table).values(**values).on_conflict_do_nothing(index_elements=keys)
    inserted = session.execute(stmt.returning(table.c.id)).scalar_one_or_none()
    session.commit()
    return int(inserted) if inserted is not None else None


def upsert(session: Session, table: Any, values: dict[str, Any], *, keys: list[str], replace: list[str]) -> None:
    """INSERT … ON CONFLICT (keys) DO UPDATE SET the `replace` columns: one statement, so two writers of one key
    never meet a row the other deleted or inserted between a read and a write (not committed: the caller's
    transaction holds it with whatever else it records, such as the audit line)."""
    stmt = dialect_insert(session, table).values(**values)
    session.execute(stmt.on_conflict_do_update(index_elements=keys, set_={name: values[name] for name in replace}))


def delete_rows(session: Session, table: Any, *where: Any) -> bool:
    """DELETE … WHERE, as one statement (an ORM delete of a row read earlier fails when another writer deleted it
    first); whether any row went."""
    result = session.execute(table.delete().where(*where))
    return bool(getattr(result, "rowcount", 0))
