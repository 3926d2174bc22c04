"""The ledger of deliveries on both backends: admitted once, finished once, taken over from a dead process once."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from bot.deliveries import DeliveryLedger, command_key, key_of, strip_secrets
from storage.db import SessionFactory
from storage.models import Delivery

COMMAND = {
    "token": "legacy-verification-token",
    "team_id": "T1",
    "user_id": "U1",
    "channel_id": "C1",
    "command": "/finetune",
    "text": "run recipe=sft-tiny",
    "trigger_id": "1.2.abc",
    "response_url": "https://hooks.slack.local/commands/1",
}


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def ledger(sessions: SessionFactory, clock: Clock, holder: str) -> DeliveryLedger:
    return DeliveryLedger(sessions=sessions, clock=clock, holder=holder, ttl=timedelta(seconds=30))


def rows(sessions: SessionFactory) -> list[Delivery]:
    from sqlmodel import select

    with sessions() as s:
        return list(s.exec(select(Delivery)).all())


def test_a_delivery_is_admitted_once_and_stored_without_secrets(sessions: SessionFactory) -> None:
    clock = Clock()
    first = ledger(sessions, clock, "host:1:a")
    assert first.admit(COMMAND) is True
    assert first.admit(COMMAND) is False  # Slack's retry of the same delivery
    [row] = rows(sessions)
    assert row.key == command_key(COMMAND) and row.state == "received" and row.holder == "host:1:a"
    assert row.payload is not None and "token" not in row.payload and row.payload["text"] == "run recipe=sft-tiny"
    first.finish(COMMAND)
    [row] = rows(sessions)
    assert row.state == "done" and row.payload is None and row.finished_at is not None


def test_a_dead_processs_delivery_is_carried_out_once_by_one_live_process(sessions: SessionFactory) -> None:
    clock = Clock()
    dead, a, b = (ledger(sessions, clock, name) for name in ("host:1:dead", "host:2:a", "host:3:b"))
    dead.heartbeat()
    assert dead.admit(COMMAND)
    done: list[tuple[str, str]] = []

    def redo(holder: str) -> Any:
        return lambda kind, body: done.append((holder, kind))

    clock.now += timedelta(seconds=10)
    a.heartbeat(), b.heartbeat()
    assert a.recover(redo("a")) == 0  # the holder's lease is alive: its work may still be going on
    clock.now += timedelta(seconds=31)  # the dead process stopped renewing its lease
    a.heartbeat(), b.heartbeat()
    assert a.recover(redo("a")) + b.recover(redo("b")) == 1
    assert done == [("a", "command")]
    [row] = rows(sessions)
    assert row.holder == "host:2:a" and row.attempts == 2 and row.state == "received"
    a.finish(row.payload or {})
    assert rows(sessions)[0].state == "done"


def test_a_delivery_whose_work_keeps_killing_its_process_is_given_up(sessions: SessionFactory) -> None:
    clock = Clock()
    assert ledger(sessions, clock, "host:0:x").admit(COMMAND)
    for attempt in range(1, 4):
        clock.now += timedelta(minutes=5)
        taker = ledger(sessions, clock, f"host:{attempt}:y")
        taker.recover(lambda kind, body: None)  # carried out, then the process dies before finishing
    assert rows(sessions)[0].state == "done"


def test_deliveries_without_work_are_not_tracked() -> None:
    assert key_of({"type": "url_verification", "challenge": "x"}) is None
    assert key_of({"type": "event_callback", "event_id": "Ev1", "event": {}}) == ("event", "event:Ev1")
    assert strip_secrets({"token": "t", "payload": {"token": "t", "a": [{"token": "t", "b": 1}]}}) == {
        "payload": {"a": [{"b": 1}]}
    }


def test_finished_deliveries_are_purged_after_a_day_at_most_every_few_minutes(sessions: SessionFactory) -> None:
    clock = Clock()
    one = ledger(sessions, clock, "h1")
    assert one.admit(COMMAND)
    one.finish(COMMAND)
    clock.now += timedelta(days=1) - timedelta(minutes=5)
    assert one.purge() == 0  # younger than a day: it still dedupes Slack's retries
    clock.now += timedelta(minutes=6)
    assert one.purge() == 0 and len(rows(sessions)) == 1  # old enough, but purged at most every 10 min per process
    clock.now += timedelta(minutes=5)
    assert one.purge() == 1 and rows(sessions) == []
