"""The group-committing intake on both backends: each admit durable before it returns, one winner per key, bursts
in shared transactions, finishes folded into the next batch."""

from __future__ import annotations

import contextlib
import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
from sqlalchemy.engine import Engine
from sqlmodel import select

from bot.deliveries import DeliveryIntake
from bot.deliveries.rawsql import DeliverySql
from storage import repos
from storage.db import SessionFactory, make_engine
from storage.models import Delivery

NOW = datetime(2026, 12, 5, 12, 0, tzinfo=UTC)


def row(key: str) -> dict[str, object]:
    return repos.delivery_row(key=key, kind="command", payload={"text": key}, holder="host:1:a", now=NOW)


def stored(engine: Engine) -> dict[str, Delivery]:
    # A separate engine, so what it reads is what was committed, not what the writer's connection holds.
    other = make_engine(str(engine.url.render_as_string(hide_password=False)))
    try:
        with SessionFactory(other)() as s:
            return {d.key: d for d in s.exec(select(Delivery)).all()}
    finally:
        other.dispose()


def test_an_admit_is_committed_before_it_returns(engine: Engine) -> None:
    intake = DeliveryIntake(engine)
    try:
        assert intake.admit(row("k1")) is True
        found = stored(engine)
        assert found["k1"].state == "received" and found["k1"].payload == {"text": "k1"}
        # Written on the driver's cursor, read back through the ORM: the same types a session would store.
        assert found["k1"].received_at == NOW and found["k1"].attempts == 1 and found["k1"].holder == "host:1:a"
        assert intake.admit(row("k1")) is False  # Slack's retry of it
    finally:
        intake.close()


def test_a_burst_has_one_winner_per_key_and_shares_transactions(engine: Engine) -> None:
    intake = DeliveryIntake(engine)
    keys = [f"key-{i % 60}" for i in range(240)]  # every key four times, interleaved
    start = threading.Barrier(32)

    def admit(key: str) -> tuple[str, bool]:
        with contextlib.suppress(threading.BrokenBarrierError):
            start.wait(timeout=5)
        return key, intake.admit(row(key))

    try:
        with ThreadPoolExecutor(32) as pool:
            results = list(pool.map(admit, keys))
    finally:
        intake.close()
    winners = [key for key, new in results if new]
    assert sorted(winners) == sorted(set(keys))  # exactly one True per key
    assert set(stored(engine)) == set(keys)
    assert intake.batches < len(keys)  # admits that arrived together were committed together


def test_finishes_are_written_with_the_next_batch_and_close_flushes_them(engine: Engine) -> None:
    intake = DeliveryIntake(engine)
    assert intake.admit(row("a")) is True
    intake.finish("a", NOW)
    intake.finish("never-admitted", NOW)  # a finish for a key that is not there changes nothing
    intake.close()
    found = stored(engine)
    assert found["a"].state == "done" and found["a"].payload is None
    assert set(found) == {"a"}
    with pytest.raises(RuntimeError):
        intake.admit(row("b"))


def test_a_failing_batch_fails_its_admits_and_the_writer_goes_on(engine: Engine) -> None:
    intake = DeliveryIntake(engine)
    try:
        bad = row("x")
        bad["kind"] = None  # NOT NULL: the database refuses the batch
        with pytest.raises(Exception, match=r"(?i)null"):
            intake.admit(bad)
        assert intake.admit(row("y")) is True  # the next batch is written
    finally:
        intake.close()
    assert set(stored(engine)) == {"y"}


def test_a_value_the_column_types_refuse_fails_its_batch_only(engine: Engine) -> None:
    intake = DeliveryIntake(engine)
    try:
        naive = row("n")
        naive["received_at"] = NOW.replace(tzinfo=None)  # storage takes aware UTC only
        with pytest.raises(ValueError, match="naive"):
            intake.admit(naive)
        assert intake.admit(row("m")) is True
        intake.finish("m", NOW)
    finally:
        intake.close()
    found = stored(engine)
    assert set(found) == {"m"} and found["m"].finished_at == NOW and found["m"].state == "done"


def test_a_batch_holding_a_key_seen_before_tells_each_admit_whether_it_was_new(engine: Engine) -> None:
    sql = DeliverySql(engine.dialect)
    raw = engine.raw_connection()
    try:
        cursor = raw.cursor()
        assert sql.insert(cursor, [row("old")]) == {"old"}  # all new: the one statement's count answers
        raw.commit()
        # A retry of "old" in a batch of new ones: the count falls short, nothing is kept, RETURNING says which.
        assert sql.insert(cursor, [row("new-1"), row("old"), row("new-2"), row("new-1")]) is None
        raw.rollback()
        assert set(stored(engine)) == {"old"}
        assert sql.insert_returning(cursor, [row("new-1"), row("old"), row("new-2")]) == {"new-1", "new-2"}
        raw.commit()
    finally:
        raw.close()
    assert set(stored(engine)) == {"old", "new-1", "new-2"}


def synchronous(engine: Engine, intake: DeliveryIntake) -> str:
    """The intake connection's commit durability, as the database reports it."""
    cursor = intake._connection().cursor()
    try:
        cursor.execute("PRAGMA synchronous" if engine.dialect.name == "sqlite" else "SHOW synchronous_commit")
        return str(cursor.fetchone()[0])
    finally:
        cursor.close()


def test_process_durability_relaxes_only_the_intakes_commits_and_power_keeps_every_commit_on_disk(
    engine: Engine,
) -> None:
    relaxed, strict = ("1", "2") if engine.dialect.name == "sqlite" else ("off", "on")  # SQLite: NORMAL=1, FULL=2
    for durability, expected in (("process", relaxed), ("power", strict)):
        intake = DeliveryIntake(engine, durability=durability)
        try:
            assert intake.admit(row(durability)) is True
            assert synchronous(engine, intake) == expected
        finally:
            intake.close()
    # The bot's other connections keep the database's own durability.
    with engine.connect() as conn:
        query = "PRAGMA synchronous" if engine.dialect.name == "sqlite" else "SHOW synchronous_commit"
        assert str(conn.exec_driver_sql(query).scalar()) == strict
    with pytest.raises(ValueError, match="expected one of process, power"):
        DeliveryIntake(engine, durability="disk")


def test_on_postgresql_each_batch_is_one_statement_committed_as_it_runs(engine: Engine) -> None:
    intake = DeliveryIntake(engine)
    try:
        assert intake.admit(row("one-trip")) is True
        raw = intake._connection()
        if engine.dialect.name != "postgresql":
            assert not intake._sql.autocommits  # SQLite: one transaction per batch, as before
            return
        assert intake._sql.autocommits and raw.dbapi_connection.autocommit is True  # type: ignore[union-attr]
        # Nothing left open between batches: the row is committed, and so is a batch of admits and a finish.
        assert raw.dbapi_connection.info.transaction_status.name == "IDLE"  # type: ignore[union-attr]
        intake.finish("one-trip", NOW)
        assert intake.admit(row("one-trip")) is False and intake.admit(row("two-trip")) is True
    finally:
        intake.close()
    rows = stored(engine)
    assert rows["one-trip"].state == "done" and rows["two-trip"].state == "received"
