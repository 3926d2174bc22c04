"""One row per key written by several sessions at once, on SQLite and PostgreSQL: each write is one statement
(`INSERT … ON CONFLICT DO UPDATE`, `DELETE … WHERE`), so none fails, and what is left is what one of them wrote."""

from __future__ import annotations

import threading
from collections.abc import Callable

from storage import repos
from storage.db import SessionFactory

WRITERS = 8
ROUNDS = 5


def _together(calls: list[Callable[[], object]]) -> list[BaseException]:
    """Every call on its own thread, released at once; the errors they raised."""
    barrier = threading.Barrier(len(calls))
    errors: list[BaseException] = []

    def run(call: Callable[[], object]) -> None:
        barrier.wait()
        try:
            call()
        except BaseException as exc:  # the test reports every one
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(call,)) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return errors


def test_budgets_set_and_removed_together_never_fail(sessions: SessionFactory) -> None:
    def set_to(hours: float) -> Callable[[], object]:
        def write() -> None:
            with sessions() as s:
                repos.set_budget(s, channel="C1", hours=hours, period="week", set_by="U1")

        return write

    def remove() -> None:
        with sessions() as s:
            repos.delete_budget(s, channel="C1")

    for _ in range(ROUNDS):
        calls = [set_to(float(i + 1)) if i % 2 else remove for i in range(WRITERS)]
        assert _together(calls) == []
        with sessions() as s:
            budget = repos.get_budget(s, channel="C1")
        assert budget is None or budget.hours in {float(i + 1) for i in range(1, WRITERS, 2)}


def test_digest_schedules_and_notify_preferences_written_together_never_fail(sessions: SessionFactory) -> None:
    def schedule(minute: int) -> Callable[[], object]:
        def write() -> None:
            with sessions() as s:
                repos.upsert_digest_schedule(s, channel="C1", cron=f"{minute} 9 * * *", timezone="UTC", created_by="U1")

        return write

    def off() -> None:
        with sessions() as s:
            repos.delete_digest_schedule(s, channel="C1")

    def prefer(notify: str) -> Callable[[], object]:
        def write() -> None:
            with sessions() as s:
                repos.set_notify_preference(s, user="U1", notify=notify)

        return write

    for _ in range(ROUNDS):
        calls: list[Callable[[], object]] = [schedule(i) if i % 3 else off for i in range(WRITERS)]
        calls += [prefer(("thread", "dm", "both")[i % 3]) for i in range(WRITERS)]
        assert _together(calls) == []
        with sessions() as s:
            rows = [x for x in repos.list_digest_schedules(s) if x.channel == "C1"]
            assert len(rows) <= 1
            assert repos.get_notify_preference(s, user="U1") in {"thread", "dm", "both"}
