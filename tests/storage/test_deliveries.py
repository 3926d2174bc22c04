"""Deliveries: the unique key makes a second delivery a clean no-op, even under a race."""

from __future__ import annotations

import threading

from sqlalchemy import func
from sqlmodel import select

from storage.db import SessionFactory
from storage.models import Delivery
from storage.repos import admit_delivery, finish_delivery, purge_deliveries, record_delivery


def test_second_delivery_is_a_duplicate(sessions: SessionFactory) -> None:
    with sessions() as s:
        assert record_delivery(s, key="Ev1", kind="event") is True
    with sessions() as s:
        assert record_delivery(s, key="Ev1", kind="event") is False
        assert record_delivery(s, key="Ev2", kind="event") is True


def test_concurrent_writers_of_one_key_get_exactly_one_row(sessions: SessionFactory) -> None:
    writers, keys = 8, 15
    results: dict[str, list[bool]] = {f"Ev{k}": [] for k in range(keys)}
    errors: list[BaseException] = []
    lock = threading.Lock()

    def write(key: str, barrier: threading.Barrier) -> None:
        try:
            barrier.wait()
            with sessions() as s:
                fresh = record_delivery(s, key=key, kind="event")
            with lock:
                results[key].append(fresh)
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    for key in results:
        barrier = threading.Barrier(writers)
        threads = [threading.Thread(target=write, args=(key, barrier)) for _ in range(writers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    assert errors == []
    for key, outcomes in results.items():
        assert sorted(outcomes) == [False] * (writers - 1) + [True], key
    with sessions() as s:
        assert s.exec(select(func.count()).select_from(Delivery)).one() == keys


def test_purge_deletes_finished_deliveries_past_the_window_and_keeps_unfinished_work(sessions: SessionFactory) -> None:
    from datetime import UTC, datetime, timedelta

    now = datetime.now(UTC)
    old = now - timedelta(days=2)
    with sessions() as s:
        for key in ("old-done-1", "old-done-2", "old-unfinished"):
            admit_delivery(s, key=key, kind="command", payload={"k": key}, holder="h", now=old)
        admit_delivery(s, key="new-done", kind="command", payload={}, holder="h", now=now)
        for key in ("old-done-1", "old-done-2", "new-done"):
            finish_delivery(s, key=key, now=now)
    with sessions() as s:
        assert purge_deliveries(s, received_before=now - timedelta(days=1), limit=1) == 1
        assert purge_deliveries(s, received_before=now - timedelta(days=1)) == 1
        assert purge_deliveries(s, received_before=now - timedelta(days=1)) == 0
        keys = sorted(d.key for d in s.exec(select(Delivery)).all())
    assert keys == ["new-done", "old-unfinished"]
    # A retry of a purged key would be new again; past Slack's retry window none comes.
