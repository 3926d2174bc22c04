"""Following sweeps on each watcher tick: trials recorded from ONE Polyaxon request, the leaderboard edited in place.

Per sweep and tick: one request lists the matrix's trials with their statuses, inputs and outputs (the last
value of each metric is in the outputs, written by Polyaxon's summary sync), and the matrix's own status comes
from the watcher's list of active runs (one more request only once it has left that list). A sweep of 50
trials costs what a sweep of one does. Per trial transition the bot edits two messages (the leaderboard and
the card, throttled), and posts nothing; it posts the first failure's cause, an early stop's reason, the
sweep's own status changes and, once, the final summary with its plot.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from bot.redact import cap_tail, redact
from bot.runs import INLINE_LOG_BYTES
from bot.runs.deps import RunDeps
from bot.runs.thread import RunThread
from bot.slack.blocks import escape
from bot.sweeps.board import (
    ENDED,
    FAILED,
    TrialRow,
    best,
    board_digest,
    leaderboard_csv,
    progress,
    render_leaderboard,
    trial_rows,
    values_text,
)
from bot.sweeps.card import render_summary
from bot.sweeps.decide import cutoff_reached, failure_streak, target_reached
from bot.sweeps.plot import plot_space
from bot.sweeps.service import SweepService
from storage import repos
from storage.models import Run, Sweep

if TYPE_CHECKING:
    from bot.polyaxon import RemoteView, RunInfo

log = logging.getLogger(__name__)

LEADERBOARD_MIN_INTERVAL_S = 3.0
# A matrix that has ended while some trial never reports an end (a trial Polyaxon left `created`) is summed up
# after this long anyway, with those trials as they are.
SUMMARY_GRACE = timedelta(minutes=2)
FAILURE_TAIL_LINES = 60


@dataclass
class FollowStats:
    """What one pass over the sweeps did."""

    sweeps: int = 0
    polyaxon_requests: int = 0
    transitions: int = 0
    errors: list[str] = field(default_factory=list)


class SweepFollower:
    """Keeps each sweep's trials, leaderboard, card and status current, and stops a sweep that should stop."""

    def __init__(self, deps: RunDeps, thread: RunThread, sweeps: SweepService) -> None:
        self.deps = deps
        self.thread = thread
        self.sweeps = sweeps
        self._edited: dict[int, float] = {}

    def follow(self, remote: RemoteView | None, still_leader: Callable[[], bool] = lambda: True) -> FollowStats:
        """One pass: every sweep still active, or ended without its summary; `remote` is the tick's view of Polyaxon."""
        from bot.polyaxon import GatewayError

        stats = FollowStats()
        with self.deps.sessions() as s:
            followed = list(repos.followed_sweeps(s))
        for sweep, run in followed:
            if not still_leader():
                break
            if run.polyaxon_uuid is None:
                if run.status in ENDED:  # cancelled before Polyaxon had it: nothing ran, say so once
                    self._summarize(sweep, run, [])
                continue  # not submitted yet: the submission retry is the run machinery's
            stats.sweeps += 1
            try:
                self._follow_one(sweep, run, remote, stats)
            except GatewayError as exc:
                log.warning("sweeps: %s: %s", run.name, exc)
                stats.errors.append(f"{run.name}: {exc}")
        return stats

    def _follow_one(self, sweep: Sweep, run: Run, remote: RemoteView | None, stats: FollowStats) -> None:
        uuid = run.polyaxon_uuid or ""
        info = remote.get(uuid) if remote is not None else None
        unchanged = remote is not None and remote.unchanged(uuid)
        if info is None and run.status not in ENDED and not unchanged:
            info = self.deps.gateway.get_run(uuid, with_conditions=False)
            stats.polyaxon_requests += 1
        children = self.deps.gateway.list_children(uuid)
        stats.polyaxon_requests += 1
        trials = self._sync_trials(sweep, run, children)
        rows = trial_rows(sweep, trials, run.eval_contract_hash)
        self._tell_first_failure(run, trials, rows, stats)
        if run.status not in ENDED and sweep.stop_reason is None:
            self._maybe_stop(sweep, run, rows)
        if info is not None and info.status != run.status:
            if info.status in ENDED and sweep.stop_reason is None:
                self._note_polyaxon_stop(run, rows, sweep)
            run = self._transition(run, info, rows)
            stats.transitions += 1
        with self.deps.sessions() as s:
            sweep = repos.get_sweep(s, run_id=run.id or 0) or sweep
        ended = run.status in ENDED and (
            all(row.status in ENDED for row in rows)
            or (run.finished_at is not None and self.deps.clock() - run.finished_at > SUMMARY_GRACE)
        )
        changed = self._leaderboard(sweep, run, rows, final=ended)
        if changed:
            self.thread.update_card(run, force=ended)
        if ended and sweep.summary_ts is None:
            self._summarize(sweep, run, rows)

    # --- trials -----------------------------------------------------------------------------------

    def _sync_trials(self, sweep: Sweep, run: Run, children: Sequence[RunInfo]) -> list[Run]:
        """Record new trials (in the order Polyaxon created them) and bring the others up to date."""
        keys = {str(axis["input"]): str(axis["key"]) for axis in sweep.space}
        ordered = sorted(children, key=lambda c: (c.created_at is None, c.created_at, c.uuid))
        with self.deps.sessions() as s:
            trials = {t.polyaxon_uuid: t for t in repos.sweep_trials(s, sweep_run_id=run.id or 0)}
            for child in ordered:
                metrics = _outputs(child.outputs)
                fields: dict[str, Any] = {}
                trial = trials.get(child.uuid)
                if trial is None:
                    swept = {name: child.inputs.get(name) for name in keys}
                    trial = repos.create_run(
                        s,
                        name=f"{run.name}-t{len(trials) + 1}",
                        kind="trial",
                        sweep_id=run.id,
                        polyaxon_uuid=child.uuid,
                        recipe_name=run.recipe_name,
                        recipe_hash=run.recipe_hash,
                        component=run.component,
                        params={**run.params, **swept},
                        overrides={**run.overrides, **{keys[name]: value for name, value in swept.items()}},
                        presets=list(run.presets),
                        pins=dict(run.pins),
                        comparable=run.comparable,
                        eval_contract=dict(run.eval_contract),
                        eval_contract_hash=run.eval_contract_hash,
                        requester=run.requester,
                        channel=run.channel,
                        thread_ts=run.thread_ts,
                        status=child.status,
                        last_metrics=metrics,
                        started_at=child.started_at,
                        finished_at=child.finished_at,
                        last_activity_at=self.deps.clock(),
                        cost=run.cost,  # the sweep's plan is its trials' plan: each trial holds what it says
                    )
                    trials[child.uuid] = trial
                    continue
                if child.status != trial.status:
                    fields["status"] = child.status
                    fields["last_activity_at"] = self.deps.clock()
                if metrics != trial.last_metrics:
                    fields["last_metrics"] = metrics
                if child.started_at and trial.started_at is None:
                    fields["started_at"] = child.started_at
                if child.finished_at and trial.finished_at is None:
                    fields["finished_at"] = child.finished_at
                if fields:
                    repos.update_run(s, trial, **fields)
            return sorted(trials.values(), key=lambda t: t.id or 0)

    def _tell_first_failure(
        self, run: Run, trials: Sequence[Run], rows: Sequence[TrialRow], stats: FollowStats
    ) -> None:
        """The cause of the sweep's first failed trial, once, in the thread (later failures are on the leaderboard)."""
        failed = sorted((t for t in trials if t.status in FAILED), key=lambda t: (t.finished_at is None, t.finished_at))
        if not failed:
            return
        with self.deps.sessions() as s:
            if repos.find_posted_message(s, run_id=run.id or 0, purpose="sweep_failure") is not None:
                return
        first = failed[0]
        tail = self.deps.gateway.tail_logs(first.polyaxon_uuid or "", lines=FAILURE_TAIL_LINES)
        stats.polyaxon_requests += 1
        lines = [redact(line.value, extra_secrets=self.deps.secrets) for line in tail.lines]
        inline, _ = cap_tail([escape(line) for line in lines], max_bytes=INLINE_LOG_BYTES)  # a job writes what it likes
        row = next((r for r in rows if r.name == first.name), None)
        values = f" ({escape(values_text(row.values))})" if row is not None else ""
        self.thread.post_thread(
            run,
            f":x: Trial `{escape(first.name)}`{values} failed, the sweep's first failure. Its last log lines:\n"
            f"```{inline or '(no log lines)'}```\nMore with `/finetune logs {escape(first.name)}`.",
            purpose="sweep_failure",
        )

    def _maybe_stop(self, sweep: Sweep, run: Run, rows: Sequence[TrialRow]) -> None:
        """Stop the sweep after `failure_cutoff` failed trials in a row, or once a trial reaches the target."""
        reason = None
        if cutoff_reached(rows, sweep.failure_cutoff):
            streak = failure_streak(rows)
            reason = (
                f"{len(streak)} trials failed in a row ({escape(', '.join(r.name for r in streak))}); "
                "the first failure's cause is in the thread"
            )
        elif target_reached(best(rows), sweep.target, higher=sweep.higher_is_better):
            top = best(rows)
            assert top is not None
            reason = (
                f"`{escape(top.name)}` reached the target: {escape(sweep.metric)} {top.metric:.4g} "
                f"(target {sweep.target:g})"
            )
        if reason is None:
            return
        stopped = self.sweeps.stop_sweep(run, reason=reason)
        self.thread.post_thread(
            run, f":octagonal_sign: Stopping the sweep and its {stopped} unfinished trial(s): {reason}.", purpose="stop"
        )

    def _note_polyaxon_stop(self, run: Run, rows: Sequence[TrialRow], sweep: Sweep) -> None:
        """Polyaxon's own early stopping ended the matrix before the bot saw the target: say why all the same."""
        top = best(rows)
        if not target_reached(top, sweep.target, higher=sweep.higher_is_better) or top is None:
            return
        reason = (
            f"`{escape(top.name)}` reached the target: {escape(sweep.metric)} {top.metric:.4g} (target "
            f"{sweep.target:g}); "
            "Polyaxon's early stopping ended the matrix"
        )
        with self.deps.sessions() as s:
            fresh = repos.get_sweep(s, run_id=run.id or 0)
            if fresh is not None and fresh.stop_reason is None:
                repos.update_sweep(s, fresh, stop_reason=reason)

    # --- the sweep's own status, the leaderboard and the summary ----------------------------------

    def _transition(self, run: Run, info: RunInfo, rows: Sequence[TrialRow]) -> Run:
        fields: dict[str, Any] = {"last_activity_at": self.deps.clock()}
        if info.started_at and run.started_at is None:
            fields["started_at"] = info.started_at
        if info.finished_at:
            fields["finished_at"] = info.finished_at
        done = sum(1 for row in rows if row.status == "succeeded")
        tally = f"{done} of {len(rows)} trial(s) succeeded" + ("" if info.status in ENDED else " so far")
        text = f"Sweep status: *{escape(str(info.status))}* ({tally})"
        return self.thread.transition(run, status=info.status, message="matrix", text=text, **fields)

    def _leaderboard(self, sweep: Sweep, run: Run, rows: Sequence[TrialRow], *, final: bool) -> bool:
        """Post the leaderboard once, then edit it when what it shows changes; True when it changed."""
        text, blocks = render_leaderboard(sweep, rows, title=run.name, ended=final)
        digest = board_digest(text, blocks)
        if digest == sweep.leaderboard_digest:
            return False
        key = run.id or 0
        if (
            sweep.leaderboard_ts is not None
            and not final
            and time.monotonic() - self._edited.get(key, 0.0) < LEADERBOARD_MIN_INTERVAL_S
        ):
            return False  # the next tick edits it: at most one edit every few seconds per sweep
        self._edited[key] = time.monotonic()
        ts = sweep.leaderboard_ts
        if ts is None or not self.thread.edit_thread_post(run, ts, text=text, blocks=blocks):
            ts = self.thread.post_thread(run, text, purpose="leaderboard", blocks=blocks)
        with self.deps.sessions() as s:
            fresh = repos.get_sweep(s, run_id=run.id or 0)
            if fresh is not None:
                repos.update_sweep(
                    s, fresh, leaderboard_ts=ts, leaderboard_digest=digest, progress=progress(rows, sweep.trials)
                )
        return True

    def _summarize(self, sweep: Sweep, run: Run, rows: Sequence[TrialRow]) -> None:
        """The final summary with the requester mentioned, then the metric against each swept key; once."""
        with self.deps.sessions() as s:
            posted = repos.find_posted_message(s, run_id=run.id or 0, purpose="sweep_summary")
        ts = posted.ts if posted is not None else None
        if ts is None:
            ts = self.thread.post_thread(run, render_summary(run, sweep, rows), purpose="sweep_summary")
            png = plot_space(rows, sweep.space, sweep.metric)
            if png is not None:
                self.thread.upload_to_thread(
                    run,
                    content=png,
                    filename=f"{run.name}-space.png",
                    title=f"{sweep.metric} against each swept key",
                    comment=f"{sweep.metric} of each trial's final evaluation against its swept values (best starred)",
                )
            table = leaderboard_csv(sweep, rows)
            if table is not None:
                self.thread.upload_to_thread(
                    run,
                    content=table,
                    filename=f"{run.name}-leaderboard.csv",
                    title=f"Leaderboard of {run.name}",
                    comment=f"All {len(rows)} trials: more than a Slack table holds",
                )
        with self.deps.sessions() as s:
            fresh = repos.get_sweep(s, run_id=run.id or 0)
            if fresh is not None:
                repos.update_sweep(s, fresh, summary_ts=ts)


def _outputs(outputs: dict[str, Any]) -> dict[str, Any]:
    """A trial's numbers from its outputs, and the eval contract its final evaluation was made under."""
    out: dict[str, Any] = {
        k: float(v) for k, v in outputs.items() if isinstance(v, int | float) and not isinstance(v, bool)
    }
    if isinstance(outputs.get("eval_contract_hash"), str) and outputs["eval_contract_hash"]:
        out["eval_contract_hash"] = outputs["eval_contract_hash"]
    return out
