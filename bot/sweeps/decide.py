"""When a sweep stops itself: K failed trials in a row, or a trial reaching the recipe's target. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from bot.sweeps.board import ENDED, FAILED, TrialRow


def failure_streak(rows: Sequence[TrialRow]) -> list[TrialRow]:
    """The failed trials at the end of the finishing order (the latest ones in a row), oldest first.

    Trials end in the order they finish, not the order they were created; a success or a stop breaks the streak.
    """
    ended = sorted(
        (row for row in rows if row.status in ENDED and row.finished_at is not None),
        key=lambda row: (row.finished_at or "", row.index),
    )
    streak: list[TrialRow] = []
    for row in reversed(ended):
        if row.status not in FAILED:
            break
        streak.append(row)
    return list(reversed(streak))


def cutoff_reached(rows: Sequence[TrialRow], cutoff: int) -> bool:
    """`cutoff` trials failed in a row: the rest of the space would likely burn the same way."""
    return cutoff > 0 and len(failure_streak(rows)) >= cutoff


def target_reached(best: TrialRow | None, target: float | None, *, higher: bool) -> bool:
    """The best trial's final metric meets the recipe's target (at or above it, or at or below for a loss)."""
    if best is None or target is None or best.metric is None:
        return False
    return best.metric >= target if higher else best.metric <= target
