"""UsageService: estimates before a run, accounting after it, `/finetune usage`, budgets and their 80 % notice.

What a budget holds back is held by the registry's approval machinery (bot.registry.holds); this service
only says whether a plan would take its channel over budget, and by how much.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from slack_sdk.errors import SlackApiError
from sqlmodel import Session

from bot.catalog import Plan
from bot.grammar import BudgetCommand, UsageCommand
from bot.runs import Reply, RunError
from bot.runs.deps import RunDeps
from bot.slack.blocks import escape, mention
from bot.usage.accounting import UsageRow, group_usage, period_bounds, run_usage, running_seconds
from bot.usage.estimate import Estimate, Sample, Work, estimate, work_units
from bot.usage.render import NOTICE_LEVEL, BudgetState, render_budget, render_removed, render_usage, top_spenders
from storage import repos
from storage.models import Run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BudgetVerdict:
    """Would this plan take its channel over budget: the state, the estimate and what to say."""

    over: bool
    state: BudgetState | None = None
    estimate: Estimate | None = None
    reason: str = ""


class UsageService:
    """Accelerator-hours for the run service's runs."""

    def __init__(self, deps: RunDeps) -> None:
        self.deps = deps

    # --- before ------------------------------------------------------------------------------------

    def estimate(self, plan: Plan, *, trials: int = 1) -> Estimate | None:
        """The plan's estimate: measured on the newest confirmed run of its recipe on the same presets, or bounded."""
        if plan.cost is None:
            return None
        presets = ",".join(plan.presets) or "the recipe's presets"
        memory = plan.memory
        work = Work(
            parameters=memory.parameters if memory is not None else None,
            trainable=memory.trainable_parameters if memory is not None else None,
            rows=plan.train_rows,
            row_bytes=plan.train_row_bytes,
        )
        sample = self._sample(plan)
        return estimate(plan.cost, plan.params, sample, presets=f"`{presets}`", trials=trials, work=work)

    def _sample(self, plan: Plan) -> Sample | None:
        with self.deps.sessions() as s:
            for run in repos.measured_runs(s, recipe_name=plan.recipe):
                work = work_units(run.params)
                if list(run.presets) != list(plan.presets) or work is None:
                    continue
                seconds = self._ran_s(s, run)
                if seconds > 0:
                    return Sample(run_name=run.name, unit=work[0], units=work[1], running_s=seconds)
        return None

    # --- after ------------------------------------------------------------------------------------

    def settle(self, run: Run) -> Run:
        """Store an ended run's running seconds and unit-hours with it (the card shows both); the run as stored now."""
        if not run.cost:
            return run
        with self.deps.sessions() as s:
            fresh = repos.get_run(s, run_id=run.id or 0) or run
            profile = dict(fresh.cost or {})
            seconds = self._ran_s(s, fresh)
            hours = seconds * float(profile.get("count") or 0) / 3600.0
            # The card says "ran" from `used_s`: what it shows and what the hours count are one number.
            cost = {**profile, "used_s": seconds, "used_hours": hours}
            if profile.get("price") is not None:
                cost["used_money"] = hours * float(profile["price"])
            return repos.update_run(s, fresh, cost=cost)

    def _ran_s(self, session: Session, run: Run) -> float:
        """Seconds the run held what it asked for, from its status events and Polyaxon's stamps."""
        events = [(e.status, e.observed_at) for e in repos.list_status_events(session, run_id=run.id or 0)]
        return running_seconds(events, started_at=run.started_at, finished_at=run.finished_at, now=self.deps.clock())

    def rows(self, channel: str | None, period: str, by: str) -> tuple[list[UsageRow], datetime, datetime]:
        """Usage rows of a channel (or all) for the current period, and the period's start and now."""
        now = self.deps.clock()
        start, end = period_bounds(period, now)
        with self.deps.sessions() as s:
            found = repos.runs_in_period(s, channel=channel, start=start, end=end)
        usages = [u for run, events in found if (u := run_usage(run, events, start=start, end=end, now=now))]
        return group_usage(usages, by), start, now

    def usage(self, cmd: UsageCommand, *, channel: str) -> Reply:
        """`/finetune usage`."""
        rows, start, now = self.rows(channel, cmd.period, cmd.by)
        budget = self.budget_state(channel)
        blocks = render_usage(rows, channel=channel, period=cmd.period, by=cmd.by, start=start, now=now, budget=budget)
        return Reply(text=f"Usage in <#{escape(channel)}> this {cmd.period}", blocks=blocks)

    def digest_line(self, channel: str) -> str | None:
        """The digest's usage line for the channel's week."""
        rows, _, _ = self.rows(channel, "week", "user")
        return top_spenders(rows)

    # --- budgets ----------------------------------------------------------------------------------

    def has_budget(self, channel: str) -> bool:
        """Whether the channel has a budget (one query: what a submission asks before planning for it)."""
        with self.deps.sessions() as s:
            return repos.get_budget(s, channel=channel) is not None

    def budget_state(self, channel: str) -> BudgetState | None:
        """The channel's budget and its accelerator-hours spent this period (running runs so far)."""
        with self.deps.sessions() as s:
            budget = repos.get_budget(s, channel=channel)
        if budget is None:
            return None
        rows, start, _ = self.rows(channel, budget.period, "user")
        spent = sum(r.accelerator_hours for r in rows)
        return BudgetState(hours=budget.hours, period=budget.period, spent=spent, start=start)

    def budget(self, cmd: BudgetCommand, *, user: str, channel: str) -> Reply:
        """`/finetune budget [set HOURS per=…| off]`: show, or (approvers only, audited) set or remove."""
        if cmd.action != "show":
            if user not in self.deps.people.approvers():
                raise RunError(
                    f"only an approver may change the channel's budget (FINETUNE_APPROVERS); {mention(user)} is not one"
                )
            removed = self.budget_state(channel) if cmd.action == "off" else None
            with self.deps.sessions() as s:
                if cmd.action == "set":
                    assert cmd.hours is not None
                    repos.set_budget(s, channel=channel, hours=cmd.hours, period=cmd.period, set_by=user)
                    detail = f"{cmd.hours:g} accelerator-hours per {cmd.period}"
                else:
                    if not repos.delete_budget(s, channel=channel):
                        raise RunError(f"<#{escape(channel)}> has no budget to remove")  # mrkdwn: the channel is a link
                    detail = "removed"
                repos.add_audit(
                    s, user=user, channel=channel, command=f"budget {cmd.action}", outcome="ok", detail=detail
                )
            if cmd.action == "off":
                return Reply(text=render_removed(channel, removed, user))
            self.notify_if_near(channel)
        return Reply(text=render_budget(channel, self.budget_state(channel)))

    def verdict(self, plan: Plan, *, channel: str, trials: int = 1) -> BudgetVerdict:
        """Whether the plan's estimate would take the channel over its budget this period (accelerators only)."""
        state = self.budget_state(channel)
        if state is None or plan.cost is None or plan.cost.unit != "accelerator":
            return BudgetVerdict(over=False, state=state)
        guess = self.estimate(plan, trials=trials)
        if guess is None:
            return BudgetVerdict(over=False, state=state, reason="no estimate (no confirmed run, no maxDuration)")
        over = state.spent + guess.hours > state.hours
        reason = (
            f"its estimate {guess.line()} on top of {state.spent:,.2f} spent would pass the {state.line()}"
            if over
            else ""
        )
        return BudgetVerdict(over=over, state=state, estimate=guess, reason=reason)

    def notify_if_near(self, channel: str) -> bool:
        """Tell the channel once per period when 80 % of its budget is spent; whether it was told now."""
        state = self.budget_state(channel)
        if state is None or state.share * 100 < NOTICE_LEVEL:
            return False
        with self.deps.sessions() as s:
            if not repos.claim_budget_notice(s, channel=channel, period_start=state.start, level=NOTICE_LEVEL):
                return False
        text = f":warning: <#{escape(channel)}> has spent {state.share:.0%} of its {state.line()}."
        try:
            self.deps.client.chat_postMessage(channel=channel, text=text)
        except SlackApiError as exc:
            # Given back: the next run that ends (or is submitted) in the channel tells it.
            log.error("budget notice to %s not posted (retried later): %s", channel, exc.response.get("error"))
            with self.deps.sessions() as s:
                repos.release_budget_notice(s, channel=channel, period_start=state.start, level=NOTICE_LEVEL)
            return False
        return True
