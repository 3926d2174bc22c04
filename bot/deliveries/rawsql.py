"""The intake's two statements as driver-level SQL: a multi-row INSERT … ON CONFLICT DO NOTHING RETURNING and the
finishing UPDATE, sent on a raw DBAPI cursor.

The intake's writer runs under the interpreter lock that every waiting ack needs. Through SQLAlchemy's Core a
batch cost ~0.3–0.5 ms of Python (execution context, cache key, result proxy) before the driver saw it, per
batch, and under a burst a batch is often one or two rows. Here the SQL text is built once per batch size from
the `deliveries` table and values go through the same type processors SQLAlchemy would apply (aware UTC
timestamps, JSON), so what is stored is byte for byte what a session stores. Written by hand because SQLAlchemy
has no lighter public path than `exec_driver_sql`, which keeps most of that cost.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Dialect

from storage.models import Delivery

# The columns an admit writes, in `storage.repos.delivery_row`'s keys; the rest take their defaults.
COLUMNS = ("key", "kind", "received_at", "state", "payload", "holder", "attempts")


class DeliverySql:
    """Build and run the intake's statements for one dialect (SQLite or PostgreSQL)."""

    def __init__(self, dialect: Dialect) -> None:
        self.dialect = dialect
        self.dbapi_error: type[Exception] = dialect.loaded_dbapi.Error
        table = Delivery.__table__  # type: ignore[attr-defined]
        self._processors: list[Callable[[Any], Any] | None] = [
            table.c[name].type.dialect_impl(dialect).bind_processor(dialect) for name in COLUMNS
        ]
        self._finished_at = table.c.finished_at.type.dialect_impl(dialect).bind_processor(dialect)
        quote = dialect.identifier_preparer.quote
        self._mark = "?" if dialect.name == "sqlite" else "%s"
        self._table = quote(table.name)
        self._columns = ", ".join(quote(name) for name in COLUMNS)
        self._key = quote("key")
        self._row_marks = "(" + ", ".join([self._mark] * len(COLUMNS)) + ")"
        self._inserts: dict[int, str] = {}
        mark = self._mark
        self._finish = (
            f"UPDATE {self._table} SET {quote('state')} = 'done', {quote('finished_at')} = {mark}, "
            f"{quote('payload')} = NULL WHERE {self._key} = {mark} AND {quote('state')} = 'received'"
        )

    def insert(self, cursor: Any, rows: Sequence[dict[str, Any]]) -> set[str]:
        """Insert the rows whose key is not there yet (the first of a key within `rows`); the keys inserted."""
        unique: dict[str, dict[str, Any]] = {}
        for row in rows:
            unique.setdefault(str(row["key"]), row)
        params: list[Any] = []
        for row in unique.values():
            for name, process in zip(COLUMNS, self._processors, strict=True):
                value = row[name]
                params.append(process(value) if process is not None and value is not None else value)
        cursor.execute(self._insert_sql(len(unique)), params)
        return {str(found[0]) for found in cursor.fetchall()}

    def finish(self, cursor: Any, finishes: Sequence[tuple[str, datetime]]) -> None:
        """Mark each (key, when) done, dropping its payload; a key not `received` is left as it is."""
        process = self._finished_at
        cursor.executemany(self._finish, [(process(now) if process else now, key) for key, now in finishes])

    def is_disconnect(self, error: Exception, raw: Any, cursor: Any) -> bool:
        """Whether `error` means the connection is gone (the dialect's own test)."""
        return bool(self.dialect.is_disconnect(error, raw.dbapi_connection, cursor))  # type: ignore[arg-type]

    def _insert_sql(self, count: int) -> str:
        sql = self._inserts.get(count)
        if sql is None:
            values = ", ".join([self._row_marks] * count)
            sql = (
                f"INSERT INTO {self._table} ({self._columns}) VALUES {values} "
                f"ON CONFLICT ({self._key}) DO NOTHING RETURNING {self._key}"
            )
            self._inserts[count] = sql
        return sql
