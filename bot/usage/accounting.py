"""Accounting: a run's accelerator-hours from its recorded status times, clipped to a period. Pure.

A run holds its accelerators while Polyaxon says it is running (`running`, `processing`, `warning`, and
`stopping` after those: its processes live until they are killed): from a recorded transition into one of those
to the next transition out, or to now while it still runs. The watcher sees each transition up to a tick late,
so Polyaxon's own stamps bound the running: `started_at` moves the first start earlier (and stands in alone for a
run that started and ended between two ticks, or a sweep trial, whose status the bot mirrors without events) and
`finished_at` ends it. `running_seconds` is the one measure of a run's running time: the card's "ran" and its
unit-hours both come from it. Retries are runs of their own, attributed to their first attempt's requester,
recipe and presets like every attempt; preflights and serving checks count too.
"""

from __future__ import annotations

import calendar
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

HOLDING = frozenset({"running", "processing", "warning"})
# A stop asked of a running run: its processes hold what they asked for until they exit (SIGTERM, then SIGKILL).
STILL_HOLDING = HOLDING | {"stopping"}


@dataclass(frozen=True)
class Interval:
    """A stretch of running, [start, end)."""

    start: datetime
    end: datetime

    def seconds_within(self, start: datetime, end: datetime) -> float:
        """How much of it falls in [start, end)."""
        lo, hi = max(self.start, start), min(self.end, end)
        return max(0.0, (hi - lo).total_seconds())


def running_intervals(
    events: Sequence[tuple[str, datetime]],
    *,
    started_at: datetime | None,
    finished_at: datetime | None,
    now: datetime,
) -> list[Interval]:
    """When the run held its accelerators, from its status events (oldest first) and Polyaxon's stamps."""
    intervals: list[Interval] = []
    opened: datetime | None = None
    for status, at in sorted(events, key=lambda e: e[1]):
        if status in HOLDING and opened is None:
            opened = at
        elif status not in STILL_HOLDING and opened is not None:
            intervals.append(Interval(opened, max(opened, at)))
            opened = None
    end = finished_at or now
    if opened is not None:
        intervals.append(Interval(opened, max(opened, end)))
    if started_at is not None:
        if not intervals:
            intervals.append(Interval(started_at, max(started_at, end)))
        elif started_at < intervals[0].start:
            intervals[0] = Interval(started_at, intervals[0].end)
    if finished_at is not None:
        # The end was observed a tick after Polyaxon stamped it: the run stopped holding at `finished_at`.
        intervals = [Interval(i.start, min(i.end, finished_at)) for i in intervals if i.start < finished_at]
    return intervals


def running_seconds(
    events: Sequence[tuple[str, datetime]],
    *,
    started_at: datetime | None,
    finished_at: datetime | None,
    now: datetime,
) -> float:
    """How long the run held what it asked for: the card's "ran" and the base of its unit-hours."""
    spans = running_intervals(events, started_at=started_at, finished_at=finished_at, now=now)
    return sum((span.end - span.start).total_seconds() for span in spans)


def unit_hours(intervals: Iterable[Interval], count: float, start: datetime, end: datetime) -> float:
    """Accelerator-hours (or core-hours) of `count` units held over `intervals`, within [start, end)."""
    return sum(i.seconds_within(start, end) for i in intervals) * count / 3600.0


def period_bounds(period: str, now: datetime) -> tuple[datetime, datetime]:
    """The current week (from Monday 00:00 UTC) or month (from the 1st, 00:00 UTC) around `now`: [start, end)."""
    now = now.astimezone(UTC)
    midnight = now.replace(hour=0, minute=0, second=0, microsecond=0)
    if period == "week":
        start = midnight - timedelta(days=midnight.weekday())
        return start, start + timedelta(days=7)
    start = midnight.replace(day=1)
    days = calendar.monthrange(start.year, start.month)[1]
    return start, start + timedelta(days=days)


@dataclass
class RunUsage:
    """One run's usage in a period, with what it is attributed to."""

    run_name: str
    requester: str
    recipe: str
    presets: str
    kind: str
    unit: str
    hours: float
    money: float | None
    currency: str | None
    attempt: int = 1


@dataclass
class UsageRow:
    """A group's usage (a user, a recipe or a preset set)."""

    key: str
    accelerator_hours: float = 0.0
    core_hours: float = 0.0
    money: float = 0.0
    priced: bool = False
    currency: str | None = None
    runs: int = 0
    retries: int = 0
    preflights: int = 0
    names: list[str] = field(default_factory=list)


def run_usage(
    run: Any, events: Sequence[tuple[str, datetime]], *, start: datetime, end: datetime, now: datetime
) -> RunUsage | None:
    """A stored run's usage in [start, end), or None when it held nothing there (or has no cost profile)."""
    cost = run.cost or {}
    if not cost:
        return None
    intervals = running_intervals(events, started_at=run.started_at, finished_at=run.finished_at, now=now)
    hours = unit_hours(intervals, float(cost.get("count") or 0), start, min(end, now))
    if hours <= 0:
        return None
    price = cost.get("price")
    return RunUsage(
        run_name=run.name,
        requester=run.requester,
        recipe=run.recipe_name,
        presets=",".join(run.presets) or "(recipe defaults)",
        kind=run.kind,
        unit=str(cost.get("unit") or "accelerator"),
        hours=hours,
        money=None if price is None else hours * float(price),
        currency=cost.get("currency") if price is not None else None,
        attempt=run.attempt,
    )


def group_usage(usages: Iterable[RunUsage], by: str) -> list[UsageRow]:
    """Rows by user, recipe or preset set, most accelerator-hours first (then core-hours)."""
    rows: dict[str, UsageRow] = {}
    for usage in usages:
        key = {"user": usage.requester, "recipe": usage.recipe, "preset": usage.presets}[by]
        row = rows.setdefault(key, UsageRow(key=key))
        if usage.unit == "accelerator":
            row.accelerator_hours += usage.hours
        else:
            row.core_hours += usage.hours
        if usage.money is not None:
            row.money += usage.money
            row.priced = True
            row.currency = usage.currency
        row.runs += 1
        row.retries += int(usage.attempt > 1)
        row.preflights += int(usage.kind == "preflight")
        row.names.append(usage.run_name)
    return sorted(rows.values(), key=lambda r: (-r.accelerator_hours, -r.core_hours, r.key))
