"""Progress of running runs: the latest metrics on the card and the stuck flag, throttled per run.

Each refresh costs Polyaxon requests (metrics, a log line), so a run is refreshed at most every
`metrics_every`, least recently refreshed first; the throttle remembers only the runs still being watched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.runs import RunService
from storage import repos
from storage.models import Run


@dataclass(frozen=True)
class Refreshed:
    """What one refresh did."""

    polyaxon_requests: int
    stuck_flagged: bool


class Progress:
    """Refreshes running runs' metrics and flags the ones that stopped moving (once per run)."""

    def __init__(
        self,
        runs: RunService,
        *,
        metrics_every: timedelta,
        stuck_after: timedelta,
        mention: Callable[[Run], str],
    ) -> None:
        self.runs = runs
        self.metrics_every = metrics_every
        self.stuck_after = stuck_after
        self.mention = mention
        self._refreshed_at: dict[int, datetime] = {}

    def order(self, active: Sequence[Run], now: datetime) -> list[Run]:
        """The active runs, least recently refreshed first; forgets runs that are no longer active."""
        ids = {run.id or 0 for run in active}
        for key in [key for key in self._refreshed_at if key not in ids]:
            del self._refreshed_at[key]
        epoch = datetime.min.replace(tzinfo=now.tzinfo)
        return sorted(active, key=lambda r: self._refreshed_at.get(r.id or 0, epoch))

    def refresh(self, run: Run, now: datetime) -> Refreshed | None:
        """Metrics and liveness of one running run; None when it was refreshed less than `metrics_every` ago."""
        key = run.id or 0
        last = self._refreshed_at.get(key)
        if last is not None and now - last < self.metrics_every:
            return None
        self._refreshed_at[key] = now
        metrics, step = self.runs.gateway.metrics_summary(run.polyaxon_uuid or "")
        tail = self.runs.gateway.tail_logs(run.polyaxon_uuid or "", lines=1)
        requests = 3  # lineage; logs (namespace lookup is cached after the first)
        last_log = tail.lines[-1].timestamp if tail.lines else None
        changed = metrics != {k: v for k, v in run.last_metrics.items() if isinstance(v, int | float)}
        activity = run.last_activity_at or run.started_at or run.created_at
        if changed:
            activity = now
        if last_log is not None and last_log > activity:
            activity = last_log
        fields: dict[str, Any] = {"last_activity_at": activity}
        if changed:
            fields["last_metrics"] = metrics
            if step is not None:
                fields["last_step"] = step
        with self.runs.sessions() as s:
            fresh = repos.get_run(s, run_id=key)
            if fresh is None:
                return Refreshed(requests, False)
            repos.update_run(s, fresh, **fields)
        if changed:
            self.runs.thread.update_card(fresh)
        if fresh.stuck_flagged_at is None and now - activity >= self.stuck_after:
            with self.runs.sessions() as s:
                again = repos.get_run(s, run_id=key)
                if again is None or again.stuck_flagged_at is not None:
                    return Refreshed(requests, False)
                repos.update_run(s, again, stuck_flagged_at=now)
            minutes = int((now - activity).total_seconds() // 60)
            self.runs.thread.post_thread(
                fresh,
                f":warning: *Possibly stuck*: no new log line and no new metric for {minutes} min. "
                f"Check `/finetune logs {run.name}`, or stop it with the card's Stop button. "
                f"{self.mention(run)}",
                purpose="stuck",
            )
            return Refreshed(requests, True)
        return Refreshed(requests, False)
