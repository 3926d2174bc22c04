"""The watcher lease: one holder at a time, renewed by its holder, taken over only once it has expired."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from bot.lease import LeaseGuard
from storage.db import SessionFactory
from storage.leases import hold_lease, lease_holder, release_lease

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
TTL = timedelta(seconds=30)


def hold(sessions: SessionFactory, holder: str, now: datetime) -> bool:
    with sessions() as s:
        return hold_lease(s, name="watcher", holder=holder, ttl=TTL, now=now)


def holder_at(sessions: SessionFactory, now: datetime) -> str | None:
    with sessions() as s:
        return lease_holder(s, name="watcher", now=now)


def test_one_holder_renews_and_another_takes_over_only_after_expiry(sessions: SessionFactory) -> None:
    assert hold(sessions, "a", T0) is True
    assert hold(sessions, "b", T0 + timedelta(seconds=1)) is False
    assert hold(sessions, "a", T0 + timedelta(seconds=20)) is True  # renewed until T0+50s
    assert hold(sessions, "b", T0 + timedelta(seconds=45)) is False  # would have expired without the renewal
    assert holder_at(sessions, T0 + timedelta(seconds=45)) == "a"
    assert holder_at(sessions, T0 + timedelta(seconds=51)) is None  # a stopped renewing (killed)
    assert hold(sessions, "b", T0 + timedelta(seconds=51)) is True
    assert hold(sessions, "a", T0 + timedelta(seconds=52)) is False  # the old holder does not get it back
    with sessions() as s:
        release_lease(s, name="watcher", holder="a")  # not a's to release: nothing happens
    assert holder_at(sessions, T0 + timedelta(seconds=52)) == "b"
    with sessions() as s:
        release_lease(s, name="watcher", holder="b")
    assert hold(sessions, "a", T0 + timedelta(seconds=53)) is True  # a clean release hands over at once


def race(sessions: SessionFactory, holders: list[str], now: datetime) -> list[str]:
    """Every holder asks for the lease at the same moment; the ones that got it."""
    won: list[str] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(holders))

    def take(holder: str) -> None:
        try:
            barrier.wait()
            if hold(sessions, holder, now):
                won.append(holder)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=take, args=(h,)) for h in holders]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return won


def test_concurrent_replicas_racing_for_a_free_or_expired_lease_get_exactly_one_holder(
    sessions: SessionFactory,
) -> None:
    for round_, now in enumerate((T0, T0 + timedelta(minutes=5))):  # a missing row, then an expired one
        won = race(sessions, [f"r{round_}-{i}" for i in range(8)], now)
        assert len(won) == 1, won
        assert holder_at(sessions, now) == won[0]


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def test_guard_runs_the_job_only_while_holding_and_renews_during_a_long_job(sessions: SessionFactory) -> None:
    clock = Clock()
    first = LeaseGuard(sessions=sessions, name="watcher", ttl=TTL, clock=clock, holder="first")
    second = LeaseGuard(sessions=sessions, name="watcher", ttl=TTL, clock=clock, holder="second")
    assert first.run(lambda: "ticked") == "ticked"
    assert second.run(lambda: "ticked") is None and not second.holding
    # A long tick: under a third of the ttl no database write is needed; past it the lease is renewed.
    clock.now += timedelta(seconds=5)
    assert first.still_held()
    clock.now += timedelta(seconds=20)
    assert first.still_held()
    clock.now += timedelta(seconds=25)  # 25 s after the renewal at T0+25s, 55 s after it was taken: first's
    assert second.run(lambda: "ticked") is None
    clock.now += timedelta(seconds=60)  # first stalled past its ttl: second takes over
    assert second.run(lambda: "ticked") == "ticked"
    assert first.still_held() is False and first.holding is False
    second.release()
    assert holder_at(sessions, clock.now) is None
