"""Every metric row a run logged since the health rules last looked, from the metrics' histories. Pure.

The watcher's listing carries only each metric's last value. A run that logs faster than the watcher ticks (a tiny
run logs every step in a fraction of a second; a big one logs every few seconds and is seen every few) would have
its windows counted in ticks, not logs: three clipped logs in a row seen as one. So when a watched run's step has
moved, its watched metrics' histories are read (one request) and each row after the last one looked at goes
through the rules in step order, at the time it was logged, with the values logged at that step only (a rule
acts on a row that has its metric).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

# The metrics the rules read, as Polyaxon names them (a path's `/` is stored as `__`), besides the ranking metric.
WATCHED = (
    "loss",
    "grad_norm",
    "num_tokens",
    "nonfinite_values",
    "completions__clipped_ratio",
    "reward_std",
    "kl",
)
MAX_ROWS = 2000  # rows read at most per look: a bot that was away for long sees the newest, evenly spread


class Point(Protocol):
    step: int | None
    timestamp: datetime | None
    value: float


@dataclass(frozen=True)
class Row:
    """One logged row: its step, when it was logged (None when Polyaxon kept no time), the values at that step."""

    step: int
    at: datetime | None
    values: dict[str, float]


def watched(ranking: str | None) -> list[str]:
    """The metrics whose histories the rules need."""
    return [*WATCHED, *([ranking] if ranking and ranking not in WATCHED else [])]


def rows_after(history: Mapping[str, Sequence[Point]], after: int | None) -> list[Row]:
    """The rows logged at steps after `after` (all of them when None), oldest first; a step logged twice (a run
    restarted below it) keeps its newest values."""
    steps: dict[int, dict[str, float]] = {}
    stamps: dict[int, datetime] = {}
    for name, points in history.items():
        for point in points:
            if point.step is None or (after is not None and point.step <= after):
                continue
            steps.setdefault(point.step, {})[name] = point.value
            if point.timestamp is not None and (point.step not in stamps or point.timestamp > stamps[point.step]):
                stamps[point.step] = point.timestamp
    return [Row(step, stamps.get(step), values) for step, values in sorted(steps.items())]
