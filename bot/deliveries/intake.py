"""Group commit of admitted deliveries: one writer, one transaction for every admit that arrived meanwhile.

Each request thread used to open a session, INSERT and COMMIT on its own: under a burst 32 threads queued
for SQLite's single write lock (and for 15 pooled connections shared with the work threads), and on
PostgreSQL each paid a checkout with a pre-ping round trip and a COMMIT of its own. Here a request thread
hands its row to the one intake writer and waits; the writer takes every row queued by then, inserts them
with one multi-row INSERT … ON CONFLICT DO NOTHING on its own long-lived connection (bot/deliveries/rawsql.py),
commits once (on PostgreSQL the statement, with RETURNING, commits itself: one round trip), and releases each
waiting ack with whether its row was new. A row is committed before its ack; a burst costs one COMMIT per
batch instead of one per delivery. What a committed row survives is
FINETUNE_ACK_DURABILITY's (`DURABILITY` below): a killed bot always; a power loss only with `power`.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError
from sqlalchemy.pool import PoolProxiedConnection

from bot.deliveries.rawsql import DeliverySql

log = logging.getLogger(__name__)

# No batch grows past this: one statement's parameters stay well under SQLite's limit (32,766) at 7 columns.
MAX_BATCH = 500
# How long an admit waits for its batch before it gives up (the front door then answers 500 and Slack retries).
ADMIT_TIMEOUT_S = 10.0
# What an acked delivery survives (FINETUNE_ACK_DURABILITY): `process`, its batch is with the database (the OS's
# file cache, or PostgreSQL's server) before the ack, so a killed bot loses nothing; `power`, it is on disk too.
DURABILITY = ("process", "power")


class _Admit:
    """One admit waiting for its batch: a bare lock the writer releases, not a `Future`.

    Under a burst a hundred request threads wait here at once, and every ack of the burst waits for the
    interpreter lock that each of them takes again on waking. A `Future` (a `Condition` with a waiter list and a
    fresh lock per wait) made an admit cost ~0.12 ms of CPU on top of its thread in a burst of 100; this, ~0.085.
    """

    __slots__ = ("_error", "_new", "_released", "row")

    def __init__(self, row: dict[str, Any]) -> None:
        self.row = row
        self._released = threading.Lock()
        self._released.acquire()
        self._new = False
        self._error: BaseException | None = None

    def settle(self, new: bool) -> None:
        self._new = new
        self._released.release()

    def fail(self, error: BaseException) -> None:
        self._error = error
        self._released.release()

    def result(self, timeout: float) -> bool:
        if not self._released.acquire(timeout=timeout):
            raise TimeoutError(f"no commit of this delivery within {timeout:.0f} s")
        if self._error is not None:
            raise self._error
        return self._new


@dataclass
class _Finish:
    key: str
    now: datetime


class DeliveryIntake:
    """The one writer of admitted deliveries (per process): `admit(row)` returns once its row is committed."""

    def __init__(self, engine: Engine, *, durability: str = "power", max_batch: int = MAX_BATCH) -> None:
        # `power` unless told: serve passes the setting (default `process`); a bare intake keeps the stricter one.
        if durability not in DURABILITY:
            raise ValueError(f"durability {durability!r}: expected one of {', '.join(DURABILITY)}")
        self.engine = engine
        self.durability = durability
        self.max_batch = max_batch
        self._queue: queue.SimpleQueue[_Admit | _Finish | None] = queue.SimpleQueue()
        self._raw: PoolProxiedConnection | None = None
        self._sql = DeliverySql(engine.dialect)
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
        return item.result(timeout=ADMIT_TIMEOUT_S)

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
        if self._raw is not None:
            self._raw.close()
            self._raw = None

    def _commit(self, batch: list[_Admit | _Finish]) -> None:
        admits = [item for item in batch if isinstance(item, _Admit)]
        finishes = [item for item in batch if isinstance(item, _Finish)]
        if self._sql.autocommits and admits and finishes:
            # Each statement commits as it runs (PostgreSQL): the admits are answered from their own statement, so
            # that a failing finish can never fail an admit whose row is committed already (its retry would be
            # taken for a duplicate). The finishes follow, as they did within the one transaction.
            self._commit_part(admits, [])
            self._commit_part([], finishes)
        else:
            self._commit_part(admits, finishes)

    def _commit_part(self, admits: list[_Admit], finishes: list[_Finish]) -> None:
        try:
            inserted = self._write(admits, finishes)
        except Exception as exc:  # the writer serves every ack: one bad batch fails its admits, never the writer
            log.error("delivery intake: a batch of %d admits failed: %s", len(admits), exc)
            for admit in admits:
                admit.fail(exc)
            return
        self.batches += 1
        # The first of two admits of one key in a batch is the new one; the other is a retry of it.
        seen: set[str] = set()
        for admit in admits:
            key = str(admit.row["key"])
            admit.settle(key in inserted and key not in seen)
            seen.add(key)

    def _write(self, admits: Sequence[_Admit], finishes: Sequence[_Finish]) -> set[str]:
        """Insert and finish (in one transaction on SQLite; each statement committed as it runs on PostgreSQL); the
        keys that were new. One reconnect if the connection died."""
        for attempt in (1, 2):
            raw = self._connection()
            cursor = raw.cursor()
            try:
                inserted = self._insert(raw, cursor, [item.row for item in admits]) if admits else set()
                if finishes:  # after the inserts: a delivery admitted and done in one batch
                    self._sql.finish(cursor, [(item.key, item.now) for item in finishes])
                raw.commit()
                return inserted
            except Exception as exc:
                with contextlib.suppress(Exception):
                    raw.rollback()
                if not isinstance(exc, self._sql.dbapi_error):
                    raise  # a value the type processors refused (a naive timestamp): this batch only
                disconnected = self._sql.is_disconnect(exc, raw, cursor)
                if disconnected:
                    raw.invalidate()
                    self._raw = None
                if not disconnected or attempt == 2:
                    # SQLAlchemy's error type for the driver's, as a session would raise it.
                    raise DBAPIError.instance(
                        None, None, exc, self._sql.dbapi_error, connection_invalidated=disconnected
                    ) from exc
                log.warning("delivery intake: the database connection dropped; reconnecting once")
            finally:
                with contextlib.suppress(Exception):
                    cursor.close()
        raise AssertionError("unreachable")  # pragma: no cover

    def _insert(self, raw: PoolProxiedConnection, cursor: Any, rows: list[dict[str, Any]]) -> set[str]:
        if self._sql.autocommits:
            # One statement, committed as it runs (PostgreSQL): RETURNING names the new keys in the same round trip.
            return self._sql.insert_returning(cursor, rows)
        inserted = self._sql.insert(cursor, rows)
        if inserted is None:  # a retry (or a key another replica just wrote) in the batch: which ones were new
            raw.rollback()
            inserted = self._sql.insert_returning(cursor, rows)
        return inserted

    def _connection(self) -> PoolProxiedConnection:
        # Its own connection for the life of the process: no pool checkout (nor PostgreSQL's pre-ping round trip)
        # per batch. A dropped one is invalidated and replaced on the next batch.
        if self._raw is None:
            raw = self.engine.raw_connection()
            # Its own for good, out of the pool: closing it closes it, so a relaxed one never serves anyone else.
            raw.detach()
            self._sql.begin(raw)
            if self.durability == "process":
                # Only this connection's commits (admits and finishes) skip the wait for the disk, which every ack
                # of a batch shares: in one interleaved run of help bursts the median ack went from 1.27x the bare
                # app's to 1.14x. The rest of the bot's writes still wait for the disk.
                cursor = raw.cursor()
                try:
                    self._sql.flush_commits_to_os_only(cursor)
                    raw.commit()
                finally:
                    cursor.close()
            self._raw = raw
        return self._raw
