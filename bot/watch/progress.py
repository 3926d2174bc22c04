"""Progress of running runs: the latest metrics on the card and the stuck flag, from what the tick already has.

Polyaxon's summary sync copies the last value of every metric into the run's outputs, so a changed run's
listing carries its metrics and its `updated_at` says when it last moved: neither costs a request. A run that
Polyaxon did not change this tick did not move; the stuck check reads only the database.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from bot.health.rules import Alert
from bot.runs import RunService
from bot.slack.blocks import escape
from bot.watch.health import HealthWatch
from bot.watch.report import live_metrics, live_step
from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from bot.polyaxon import RunInfo

RUNNING = frozenset({"running", "processing"})


class Progress:
    """Records running runs' metrics and liveness, and flags the ones that stopped moving (once per run)."""

    def __init__(
        self,
        runs: RunService,
        *,
        stuck_after: timedelta,
        mention: Callable[[Run], str],
        tell: Callable[[Run, str, str], bool] | None = None,
    ) -> None:
        self.runs = runs
        self.stuck_after = stuck_after
        self.mention = mention
        # The requester's direct message (bot.notify), when they chose one: (run, reason, detail).
        self.tell = tell
        # Each new observation of the metrics through the recipe's alert rules (bot.health).
        self.health = HealthWatch(runs, mention=mention, tell=tell)

    def note(self, run: Run, info: RunInfo, now: datetime) -> bool:
        """A changed running run: its metrics (the card edited when they moved) and when it last moved; changed?"""
        metrics = live_metrics(info.outputs)
        step = live_step(info.outputs)
        stored = {k: v for k, v in run.last_metrics.items() if isinstance(v, int | float)}
        # A new metric row: values that moved, or the step (a row that repeats the last values is still one more
        # log for the health rules' windows).
        changed = bool(metrics) and (metrics != stored or (step is not None and step != run.last_step))
        moved = info.updated_at or now
        activity = run.last_activity_at or run.started_at or run.created_at
        if not changed and moved <= activity:
            return False
        fields: dict[str, Any] = {"last_activity_at": max(activity, moved)}
        fired: list[Alert] = []
        if changed:
            fields["last_metrics"] = metrics
            if step is not None:
                fields["last_step"] = step
            health, fired = self.health.observe(run, metrics, step, info.outputs, now)
            if health is not None:
                fields["health"] = health
        with self.runs.sessions() as s:
            fresh = repos.get_run(s, run_id=run.id or 0)
            if fresh is None:
                return False
            fresh = repos.update_run(s, fresh, **fields)
        if changed:
            # Coalesced (bot.runs.thread): a card whose metrics move every second is edited at Slack's pace.
            self.runs.thread.update_card(fresh)
            self.health.tell_fired(fresh, fired, info.outputs)
        return changed

    def flag_stuck(self, active: Sequence[Run], now: datetime) -> int:
        """Running runs that have not moved for `stuck_after` flagged in their thread, once each; how many."""
        flagged = 0
        for run in active:
            # The rows were read at the tick's start: a run that moved since only looks older, so this
            # prefilter keeps every candidate and the check below reads the candidate afresh.
            if run.status not in RUNNING or run.stuck_flagged_at is not None:
                continue
            if now - (run.last_activity_at or run.started_at or run.created_at) < self.stuck_after:
                continue
            with self.runs.sessions() as s:
                fresh = repos.get_run(s, run_id=run.id or 0)
                if fresh is None or fresh.status != run.status or fresh.stuck_flagged_at is not None:
                    continue
                activity = fresh.last_activity_at or fresh.started_at or fresh.created_at
                if now - activity < self.stuck_after:
                    continue
                fresh = repos.update_run(s, fresh, stuck_flagged_at=now)
            minutes = int((now - activity).total_seconds() // 60)
            quiet = f"no new metric and no change in Polyaxon for {minutes} min"
            text = (
                f":warning: *Possibly stuck*: {quiet}. Check `/finetune logs {escape(run.name)}`, or stop it with the "
                f"card's Stop button. {self.mention(run)}"
            )
            self.runs.thread.post_thread(fresh, text.rstrip(), purpose="stuck")
            if self.tell is not None:
                self.tell(fresh, "stuck", quiet)
            flagged += 1
        return flagged
