"""The one isolation of background items: backoff, parking, telling, forgetting, surviving a restart."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from bot.background import BackgroundItems, BackgroundItemsCollector, ItemState, RetryPolicy, item_state
from storage import repos
from storage.db import SessionFactory

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.mark.parametrize(
    ("attempts", "wait_s", "parked"),
    [(1, 10, False), (2, 20, False), (3, 40, False), (7, 600, False), (8, 600, True), (30, 600, True)],
    ids=["first", "second", "third", "capped", "limit-parks", "past-limit"],
)
def test_backoff_doubles_up_to_its_cap_and_parks_at_the_limit(attempts: int, wait_s: int, parked: bool) -> None:
    next_at, is_parked = RetryPolicy().after_failure(attempts, T0)
    assert (next_at - T0, is_parked) == (timedelta(seconds=wait_s), parked)


@pytest.mark.parametrize(
    ("parked_at", "next_at", "state"),
    [
        (None, None, ItemState.DUE),
        (None, T0 + timedelta(seconds=1), ItemState.WAITING),
        (None, T0, ItemState.DUE),
        (T0, T0 - timedelta(days=1), ItemState.PARKED),
    ],
    ids=["never-failed", "backing-off", "backoff-over", "parked"],
)
def test_item_state(parked_at: datetime | None, next_at: datetime | None, state: ItemState) -> None:
    assert item_state(parked_at=parked_at, next_at=next_at, now=T0) is state


def test_a_poison_item_is_recorded_backed_off_parked_told_and_never_stops_the_others(sessions: SessionFactory) -> None:
    clock = Clock()
    items = BackgroundItems(sessions=sessions, clock=clock, policy=RetryPolicy(first_s=10, max_s=60, limit=3))
    told: list[str] = []
    healthy: list[str] = []

    def poison() -> None:
        raise RuntimeError("channel_not_found")

    def one_pass() -> list[ItemState]:
        batch = items.batch("pending_submit")
        states = [batch.state("bad")]
        tried = batch.attempt("bad", poison, run_id=7, tell=told.append)
        batch.attempt("good", lambda: healthy.append("ok"))
        return [*states, tried.state]

    one_pass()
    [row] = items.failures(kind="pending_submit")
    assert (row.key, row.run_id, row.attempts, row.parked_at) == ("bad", 7, 1, None)
    assert "RuntimeError: channel_not_found" in row.last_error and row.next_at == T0 + timedelta(seconds=10)
    # Within its backoff it is not tried at all; the healthy item goes on every pass.
    assert one_pass()[0] is ItemState.WAITING
    assert items.failures()[0].attempts == 1
    clock.now += timedelta(seconds=10)
    one_pass()
    clock.now += timedelta(seconds=20)
    one_pass()
    [row] = items.failures()
    assert row.attempts == 3 and row.parked_at == clock.now and row.told_at is not None
    assert told == [row.last_error]
    # Parked: never tried again, even long after, and told only once.
    clock.now += timedelta(days=1)
    assert one_pass()[0] is ItemState.PARKED
    assert items.failures()[0].attempts == 3 and len(told) == 1
    assert healthy == ["ok"] * 5
    # What /metrics shows, read from the database (a restarted bot shows the same).
    samples = {
        s.labels["kind"] + ":" + s.labels["state"]: s.value
        for s in BackgroundItemsCollector(sessions).collect().__next__().samples
    }
    assert samples == {"pending_submit:parked": 1.0}


def test_an_item_that_goes_through_again_is_forgotten(sessions: SessionFactory) -> None:
    clock = Clock()
    items = BackgroundItems(sessions=sessions, clock=clock)
    calls = iter([RuntimeError("Polyaxon said 502"), None])

    def flaky() -> str:
        error = next(calls)
        if error is not None:
            raise error
        return "submitted"

    assert items.attempt("watch_run", "3", flaky).error == "RuntimeError: Polyaxon said 502"
    clock.now += timedelta(minutes=1)
    tried = items.attempt("watch_run", "3", flaky)
    assert tried.ok and tried.value == "submitted"
    with sessions() as s:
        assert repos.list_item_failures(s) == []


def test_a_whole_pass_is_retried_next_tick_and_never_parked(sessions: SessionFactory) -> None:
    items = BackgroundItems(sessions=sessions, clock=Clock(), policy=RetryPolicy(limit=1))

    def broken() -> int:
        raise ValueError("a bug in one pass")

    for _ in range(3):
        assert items.attempt("tick_pass", "sweeps", broken, parks=False).error == "ValueError: a bug in one pass"
    [row] = items.failures()
    assert row.attempts == 3 and row.parked_at is None


def test_telling_that_fails_too_still_parks(sessions: SessionFactory) -> None:
    items = BackgroundItems(sessions=sessions, clock=Clock(), policy=RetryPolicy(limit=1))

    def tell(_error: str) -> None:
        raise RuntimeError("the requester cannot be told either")

    items.attempt("digest", "C0GONE", lambda: 1 / 0, tell=tell)
    [row] = items.failures()
    assert row.parked_at is not None and row.told_at is None


def test_a_pass_that_found_no_items_reads_nothing_and_one_that_did_reads_its_failures(
    sessions: SessionFactory, engine: Engine
) -> None:
    items = BackgroundItems(sessions=sessions, clock=Clock())
    assert items.attempt("webhook_event", "9", lambda: 1 / 0).error is not None  # one failing item on record
    statements: list[str] = []

    def count(_conn: object, _cursor: object, statement: str, *_rest: object) -> None:
        statements.append(statement)

    event.listen(engine, "before_cursor_execute", count)
    try:
        empty = items.batch("webhook_event", [])
        assert statements == [] and empty.rows == {}  # most passes of an idle tick find no items: no `IN ()` read
        found = items.batch("webhook_event", ["9", "10"])
        assert len(statements) == 1
        assert (found.state("9"), found.state("10")) == (ItemState.WAITING, ItemState.DUE)
    finally:
        event.remove(engine, "before_cursor_execute", count)
