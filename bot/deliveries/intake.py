"""Group commit of admitted deliveries: one writer, one transaction for every admit that arrived meanwhile.

Each request thread used to open a session, INSERT and COMMIT on its own: under a burst 32 threads queued
for SQLite's single write lock (and for 15 pooled connections shared with the work threads), and on
PostgreSQL each paid a checkout with a pre-ping round trip and a COMMIT of its own. Here a request thread
hands its row to the one intake writer and waits; the writer takes every row queued by then, inserts them
with one multi-row INSERT … ON CONFLICT DO NOTHING RETURNING on its own long-lived connection, commits once,
and releases each waiting ack with whether its row was new. A row is durable (committed) before its ack, as
before; a burst costs one COMMIT per batch instead of one per delivery.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from storage.models import Delivery

log = logging.getLogger(__name__)

# No batch grows past this: one statement's parameters stay well under SQLite's limit (32,766) at 7 columns.
MAX_BATCH = 500
# How long an admit waits for its batch before it gives up (the front door then answers 500 and Slack retries).
ADMIT_TIMEOUT_S = 10.0


@dataclass
class _Admit:
    row: dict[str, Any]
    done: Future[bool] = field(default_factory=Future)


@dataclass
class _Finish:
    key: str
    now: datetime


class DeliveryIntake:
    """The one writer of admitted deliveries (per process): `admit(row)` returns once its row is committed."""

    def __init__(self, engine: Engine, *, max_batch: int = MAX_BATCH) -> None:
        self.engine = engine
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[_Admit | _Finish | None] = queue.SimpleQueue()
        self._conn: Connection | None = None
        self._insert: sa.Insert | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._write_loop, name="delivery-intake", daemon=True)
        self._thread.start()
        self.batches = 0  # how many transactions it committed (the bench reads it)

    def admit(self, row: dict[str, Any]) -> bool:
        """Insert `row` (a `deliveries` row) unless its key is there; True when it was new. Blocks until committed."""
        if self._closed:
            raise RuntimeError("the delivery intake is closed")
        item = _Admit(row)
        self._queue.put(item)
        return item.done.result(timeout=ADMIT_TIMEOUT_S)

    @property
    def closed(self) -> bool:
        """Closed: admits and finishes go through sessions of their own again."""
        return self._closed

    def finish(self, key: str, now: datetime) -> None:
        """Mark a delivery done, in the next batch; returns at once. Lost only with the process, and then its
        delivery is carried out once more by recovery, which is harmless (see bot/deliveries/ledger.py)."""
        if self._closed:
            raise RuntimeError("the delivery intake is closed")
        self._queue.put(_Finish(key, now))

    def close(self) -> None:
        """Commit what is queued, then stop the writer and let its connection go."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        self._thread.join(timeout=ADMIT_TIMEOUT_S)

    def _write_loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                break
            batch: list[_Admit | _Finish] = [first]
            stop = False
            # Whatever arrived while the previous batch was committing goes in this one: no timer, so a lone
            # delivery is written at once and a burst shares one COMMIT.
            while len(batch) < self.max_batch:
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    stop = True
                    break
                batch.append(more)
            self._commit(batch)
            if stop:
                break
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _commit(self, batch: list[_Admit | _Finish]) -> None:
        admits = [item for item in batch if isinstance(item, _Admit)]
        finishes = [item for item in batch if isinstance(item, _Finish)]
        try:
            inserted = self._write(admits, finishes)
        except SQLAlchemyError as exc:
            log.error("delivery intake: a batch of %d admits failed: %s", len(admits), exc)
            for admit in admits:
                admit.done.set_exception(exc)
            return
        self.batches += 1
        # The first of two admits of one key in a batch is the new one; the other is a retry of it.
        seen: set[str] = set()
        for admit in admits:
            key = str(admit.row["key"])
            admit.done.set_result(key in inserted and key not in seen)
            seen.add(key)

    def _write(self, admits: Sequence[_Admit], finishes: Sequence[_Finish]) -> set[str]:
        """Insert and finish in one transaction; the keys that were new. One reconnect if the connection died."""
        for attempt in (1, 2):
            conn = self._connection()
            try:
                with conn.begin():
                    inserted = self._insert_rows(conn, [item.row for item in admits]) if admits else set()
                    if finishes:  # after the inserts: a delivery admitted and done in one batch
                        self._finish_rows(conn, finishes)
                    return inserted
            except DBAPIError as exc:
                if not exc.connection_invalidated or attempt == 2:
                    raise
                log.warning("delivery intake: the database connection dropped; reconnecting once")
                self._conn = None
        raise AssertionError("unreachable")  # pragma: no cover

    def _insert_rows(self, conn: Connection, rows: list[dict[str, Any]]) -> set[str]:
        unique: dict[str, dict[str, Any]] = {}
        for row in rows:
            unique.setdefault(str(row["key"]), row)
        # An executemany of one cached statement: SQLAlchemy's "insertmanyvalues" sends it as multi-row INSERTs
        # with RETURNING. Building the VALUES list into the statement instead recompiled it per batch: ~2 ms of
        # CPU per 10 rows, under the interpreter lock that every waiting ack needs (90 % of a batch's time).
        return {str(key) for key in conn.execute(self._insert_statement(conn), list(unique.values())).scalars()}

    def _insert_statement(self, conn: Connection) -> sa.Insert:
        if self._insert is None:
            table = Delivery.__table__  # type: ignore[attr-defined]
            insert = postgresql.insert(table) if conn.dialect.name == "postgresql" else sqlite.insert(table)
            self._insert = insert.on_conflict_do_nothing(index_elements=["key"]).returning(table.c.key)
        return self._insert

    def _finish_rows(self, conn: Connection, finishes: Sequence[_Finish]) -> None:
        table = Delivery.__table__  # type: ignore[attr-defined]
        stmt = (
            sa.update(table)
            .where(table.c.key == sa.bindparam("finished_key"), table.c.state == "received")
            .values(state="done", finished_at=sa.bindparam("finished_now"), payload=None)
        )
        conn.execute(stmt, [{"finished_key": f.key, "finished_now": f.now} for f in finishes])

    def _connection(self) -> Connection:
        # Its own connection for the life of the process: no pool checkout (nor PostgreSQL's pre-ping round trip)
        # per batch. A dropped one is invalidated by SQLAlchemy and replaced on the next batch.
        if self._conn is None or self._conn.invalidated or self._conn.closed:
            self._conn = self.engine.connect()
        return self._conn
