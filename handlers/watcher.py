"""The watcher's scheduled job: an interval job on the volatile store, run by the holder of the watcher lease."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.base import BaseScheduler

from bot.scheduler import add_interval_job
from bot.watch import Watcher

if TYPE_CHECKING:
    from bot.lease import LeaseGuard


def register(
    scheduler: BaseScheduler,
    watcher: Watcher,
    *,
    interval_s: float,
    lease: LeaseGuard | None = None,
    first: Callable[[], None] | None = None,
) -> None:
    """Add the watcher as a named interval job in the volatile store (rebuilt at every start).

    With a lease, every replica schedules the job but only the lease holder ticks; the others' ticks only
    try to take the lease, so a dead holder's watcher moves on within the lease's ttl plus one tick.
    """
    job: Callable[[], Any] = watcher.tick if lease is None else (lambda: lease.run(watcher.tick))
    add_interval_job(scheduler, job, name="watcher", interval_s=interval_s, first=first)
