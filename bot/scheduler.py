"""The app's scheduler: explicit timezone, named jobs, coalescing, a real misfire grace, a persistent store."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.schedulers.base import STATE_STOPPED, BaseScheduler
from apscheduler.triggers.cron import CronTrigger
from sqlalchemy.engine import Engine

from bot.settings import Settings

# A digest that comes up to a day late (bot down overnight) is still posted, once, and says it is late.
MISFIRE_GRACE_S = 24 * 3600
PERSISTENT = "default"  # digests: survive restarts
VOLATILE = "memory"  # interval jobs such as the watcher: rebuilt at every start


def build_scheduler(settings: Settings, engine: Engine) -> BackgroundScheduler:
    """A BackgroundScheduler whose persistent jobs live in the bot's database (table apscheduler_jobs)."""
    return BackgroundScheduler(
        jobstores={
            PERSISTENT: SQLAlchemyJobStore(engine=engine, tablename="apscheduler_jobs"),
            VOLATILE: MemoryJobStore(),
        },
        executors={"default": {"type": "threadpool", "max_workers": 4}},
        job_defaults={"coalesce": True, "max_instances": 1, "misfire_grace_time": MISFIRE_GRACE_S},
        timezone=settings.finetune.timezone,
    )


def add_interval_job(
    scheduler: BaseScheduler,
    func: Callable[[], Any],
    *,
    name: str,
    interval_s: float,
    first: Callable[[], None] | None = None,
) -> None:
    """A job every `interval_s` in the volatile store (rebuilt at every start): never two at once, a late run
    coalesced, and given up when more than three intervals late (the next one comes soon).

    `first` runs before each run of the job: serve passes `AckGate.yield_to_acks`, so a tick that falls in a
    burst of deliveries waits (a fraction of a second at most) until their acks are out instead of taking the
    interpreter lock from them.
    """
    job = func if first is None else functools.partial(_after, first, func)
    scheduler.add_job(
        job,
        "interval",
        seconds=interval_s,
        id=name,
        name=name,
        jobstore=VOLATILE,
        replace_existing=True,
        coalesce=True,
        max_instances=1,
        misfire_grace_time=max(1, int(interval_s * 3)),
    )


def _after(first: Callable[[], None], func: Callable[[], Any]) -> Any:
    first()
    return func()


def latest_fire_time(trigger: CronTrigger, now: datetime, lookback: timedelta = timedelta(days=8)) -> datetime | None:
    """The most recent time `trigger` fired at or before `now` (within `lookback`)."""
    fire = trigger.get_next_fire_time(None, now - lookback)
    last: datetime | None = None
    while fire is not None and fire <= now:
        last = fire
        fire = trigger.get_next_fire_time(fire, fire + timedelta(microseconds=1))
    return last


def stop_scheduler(scheduler: BaseScheduler) -> None:
    """Stop without touching stored jobs.

    APScheduler 3's loop processes due jobs once more after `shutdown()` has stopped the executors: a digest
    due at that moment would fail to submit and its stored next run would move on, losing it. Detaching the
    persistent store first leaves its jobs exactly as they are for the next start.
    """
    if scheduler.state == STATE_STOPPED:
        return
    scheduler.pause()
    if PERSISTENT in scheduler._jobstores:
        scheduler.remove_jobstore(PERSISTENT)
    scheduler.shutdown(wait=True)
