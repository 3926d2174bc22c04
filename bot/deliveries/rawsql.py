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
        self._inserts: dict[tuple[int, bool], str] = {}
        # PostgreSQL: the intake's connection commits each statement itself (autocommit). In a transaction psycopg
        # sends BEGIN, the INSERT and COMMIT as three round trips, and under a burst the writer waits for the
        # interpreter lock again after each; one multi-row INSERT … RETURNING is atomic and durable on its own.
        self.autocommits = dialect.name == "postgresql"
        mark = self._mark
        self._finish = (
            f"UPDATE {self._table} SET {quote('state')} = 'done', {quote('finished_at')} = {mark}, "
            f"{quote('payload')} = NULL WHERE {self._key} = {mark} AND {quote('state')} = 'received'"
        )

    def begin(self, raw: Any) -> None:
        """Set up the intake's own connection: on PostgreSQL, each statement its own transaction (`autocommits`)."""
        if self.autocommits:
            raw.rollback()  # the pool's checkout may have left a transaction open (its ping)
            raw.dbapi_connection.autocommit = True

    def insert(self, cursor: Any, rows: Sequence[dict[str, Any]]) -> set[str] | None:
        """Insert the rows whose key is not there yet (the first of a key within `rows`): every key when all were
        new, else None, and nothing was inserted (the caller rolls back and asks `insert_returning`).

        Nearly every batch is all new (a retry of a delivery is rare), and then one statement answers it: its
        count of inserted rows. RETURNING would hand the keys back one driver step per row, and sqlite3 lets go
        of the interpreter lock at every step, to wait for it again behind the request threads of the burst.
        """
        unique = _unique(rows)
        cursor.execute(self._insert_sql(len(unique), returning=False), self._params(unique))
        return set(unique) if cursor.rowcount == len(unique) else None

    def insert_returning(self, cursor: Any, rows: Sequence[dict[str, Any]]) -> set[str]:
        """As `insert`, for a batch that holds a key seen before: the keys inserted, from RETURNING."""
        unique = _unique(rows)
        cursor.execute(self._insert_sql(len(unique), returning=True), self._params(unique))
        return {str(found[0]) for found in cursor.fetchall()}

    def _params(self, unique: dict[str, dict[str, Any]]) -> list[Any]:
        params: list[Any] = []
        for row in unique.values():
            for name, process in zip(COLUMNS, self._processors, strict=True):
                value = row[name]
                params.append(process(value) if process is not None and value is not None else value)
        return params

    def finish(self, cursor: Any, finishes: Sequence[tuple[str, datetime]]) -> None:
        """Mark each (key, when) done, dropping its payload; a key not `received` is left as it is."""
        process = self._finished_at
        cursor.executemany(self._finish, [(process(now) if process else now, key) for key, now in finishes])

    def flush_commits_to_os_only(self, cursor: Any) -> None:
        """This connection's commits return once the database has them, before they are on disk: SQLite's WAL
        is written to the OS but synced only at checkpoints (`synchronous=NORMAL`); PostgreSQL's server has the
        transaction but flushes its WAL within 3 × wal_writer_delay (`synchronous_commit=off`). Neither can be
        torn or corrupted; only a power loss (or an OS or PostgreSQL server crash) can lose the last commits."""
        if self.dialect.name == "sqlite":
            cursor.execute("PRAGMA synchronous=NORMAL")
        else:
            cursor.execute("SET synchronous_commit TO off")

    def is_disconnect(self, error: Exception, raw: Any, cursor: Any) -> bool:
        """Whether `error` means the connection is gone (the dialect's own test)."""
        return bool(self.dialect.is_disconnect(error, raw.dbapi_connection, cursor))  # type: ignore[arg-type]

    def _insert_sql(self, count: int, *, returning: bool) -> str:
        sql = self._inserts.get((count, returning))
        if sql is None:
            values = ", ".join([self._row_marks] * count)
            sql = f"INSERT INTO {self._table} ({self._columns}) VALUES {values} ON CONFLICT ({self._key}) DO NOTHING"
            if returning:
                sql += f" RETURNING {self._key}"
            self._inserts[count, returning] = sql
        return sql


def _unique(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The rows by key, the first of each key."""
    unique: dict[str, dict[str, Any]] = {}
    for row in rows:
        unique.setdefault(str(row["key"]), row)
    return unique
