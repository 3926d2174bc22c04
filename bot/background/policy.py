"""When a failing item of a background pass is tried again, and when it is given up (parked). Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import Enum


class ItemState(Enum):
    """Whether a pass tries an item now."""

    DUE = "due"  # never failed, or its backoff is over
    WAITING = "waiting"  # failed, waiting out its backoff
    PARKED = "parked"  # failed `limit` times: given up, told, and never tried again by the pass


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff from `first_s`, at most `max_s`; parked at the `limit`-th failure.

    The defaults give an item about 40 minutes (10 s, 20 s, … 10 min) before it is parked: long enough for Slack
    or Polyaxon to come back from an outage, short enough that a poison item stops costing a call per tick soon.
    """

    first_s: float = 10.0
    max_s: float = 600.0
    limit: int = 8

    def backoff(self, attempts: int) -> timedelta:
        """The wait after the `attempts`-th failure: first_s, 2×, 4×, … at most max_s."""
        return timedelta(seconds=min(self.max_s, self.first_s * 2 ** max(0, attempts - 1)))

    def after_failure(self, attempts: int, now: datetime) -> tuple[datetime, bool]:
        """After the `attempts`-th failure: when to try again, and whether the item is parked instead."""
        return now + self.backoff(attempts), attempts >= self.limit


def item_state(*, parked_at: datetime | None, next_at: datetime | None, now: datetime) -> ItemState:
    """An item's state from its failure record (no record: due)."""
    if parked_at is not None:
        return ItemState.PARKED
    if next_at is not None and next_at > now:
        return ItemState.WAITING
    return ItemState.DUE
