"""Deliveries: the unique key makes a second delivery a clean no-op, even under a race."""

from __future__ import annotations

import threading

from sqlalchemy import func
from sqlmodel import select

from storage.db import SessionFactory
from storage.models import Delivery
from storage.repos import record_delivery


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
