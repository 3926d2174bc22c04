"""The follows job: every replica takes over the log follows whose holder stopped renewing its lease.

A follow is taken over by one conditional UPDATE (storage.repos.follows), so exactly one replica goes on with it.
"""

from __future__ import annotations

from apscheduler.schedulers.base import BaseScheduler

from bot.follow import LogFollower
from bot.scheduler import add_interval_job


def register(scheduler: BaseScheduler, follows: LogFollower, *, interval_s: float) -> None:
    """Add the follows job to the volatile store (rebuilt at every start)."""
    add_interval_job(scheduler, follows.take_over, name="log_follows", interval_s=interval_s)
