"""`/finetune sweep` and the commands that work on a whole sweep: start, dry-run, status, stop, compare top N.

A sweep is a run of kind `sweep` (its card, thread, status transitions, submission retries and RUN lookup are
the run machinery's) whose Polyaxon run is one matrix operation; Polyaxon creates and schedules the trials,
which the bot records as runs of kind `trial` on the sweep (`bot.sweeps.follow` keeps them current). The bot
never loops over `run` to fake one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.grammar import CompareCommand, RunCommand, SweepCommand
from bot.runs.admit import kind_answer
from bot.runs.compare import Comparer
from bot.runs.control import CancelHook
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.kinds import Verb
from bot.runs.lookup import find_run
from bot.runs.submit import Submitter, memory_refusal
from bot.runs.thread import RunThread
from bot.slack.blocks import context, escape, mention
from bot.sweeps.board import ENDED, TrialRow, ranked, render_leaderboard, trial_rows
from bot.sweeps.card import COMPARE_TOP, render_sweep_card
from bot.sweeps.dryrun import render_sweep_plan, smoke_first_refusal
from storage import repos
from storage.models import Run, Sweep

if TYPE_CHECKING:
    from sqlmodel import Session

    from bot.catalog import SweepPlan
    from bot.usage import UsageService

DEFAULT_FAILURE_CUTOFF = 3


class SweepService:
    """Starts sweeps and answers for a whole sweep; its card is rendered here for the run thread."""

    def __init__(
        self,
        deps: RunDeps,
        thread: RunThread,
        submitter: Submitter,
        comparer: Comparer,
        usage: UsageService | None = None,
    ) -> None:
        self.deps = deps
        # Accelerator-hours: the dry run's estimate for all its trials (the budget is the handlers' to apply).
        self.usage = usage
        self.thread = thread
        self.submitter = submitter
        self.comparer = comparer
        thread.card_renderers["sweep"] = self.render_card
        # What closes when a held sweep is cancelled (the registry's void, wired by the composition root).
        self.on_cancel: list[CancelHook] = []

    # --- start ------------------------------------------------------------------------------------

    def plan(self, cmd: SweepCommand) -> SweepPlan:
        """Compile the sweep (PlanError for a bad key, value, range or recipe)."""
        return self.deps.catalog.plan_sweep(cmd)

    def dry_run(self, cmd: SweepCommand, *, user: str) -> list[dict[str, Any]]:
        """`/finetune sweep … --dry-run`: the matrix, the trials, and what the smoke-first gate would say."""
        sweep_plan = self.plan(cmd)
        refusal = self._gates(sweep_plan, cmd, user=user, submitting=False)
        guess = self.usage.estimate(sweep_plan.plan, trials=sweep_plan.trials) if self.usage is not None else None
        return render_sweep_plan(sweep_plan, refusal=refusal, estimate=guess.line() if guess else None)

    def submit(
        self, cmd: SweepCommand, *, user: str, channel: str, delivery_key: str, hold: bool = False
    ) -> tuple[Reply, Run | None]:
        """Check, gate (a confirmed run of the same pins first), record, card, submit the matrix; the sweep's run.

        `hold` records and cards it as `awaiting_approval` without submitting (over the channel's budget: the
        registry's approval request releases it); the run is None when the delivery had started it already."""
        if not self.deps.people.may_run(user):
            raise RunError(f"{mention(user)} may not start runs here; ask someone in FINETUNE_RUNNERS")
        sweep_plan = self.plan(cmd)
        refusal = self._gates(sweep_plan, cmd, user=user, submitting=True)
        if refusal is not None:
            raise RunError(refusal)
        plan = sweep_plan.plan

        def record(s: Session, run: Run) -> None:
            repos.create_sweep(
                s,
                run_id=run.id or 0,
                mode=sweep_plan.mode,
                space=[swept.model_dump() for swept in sweep_plan.space],
                trials=sweep_plan.trials,
                concurrency=sweep_plan.concurrency,
                seed=sweep_plan.seed,
                metric=sweep_plan.metric,
                higher_is_better=sweep_plan.higher,
                target=sweep_plan.target,
                failure_cutoff=DEFAULT_FAILURE_CUTOFF,
            )

        return self.submitter.start(
            plan,
            overrides=dict(cmd.overrides),
            notes=sweep_plan.notes,
            user=user,
            channel=channel,
            delivery_key=delivery_key,
            record=record,
            hold=hold,
        )

    def _gates(self, sweep_plan: SweepPlan, cmd: SweepCommand, *, user: str, submitting: bool) -> str | None:
        """Why the sweep may not start (memory, the distributed preflight, smoke-first), in mrkdwn; or None."""
        plan = sweep_plan.plan
        if plan.over_memory_budget:
            return memory_refusal(plan).replace(
                "An approver may submit it anyway with `--force` (audited).",
                "A sweep cannot be forced: fit its heaviest trial first.",
            )
        run_cmd = RunCommand(recipe=cmd.recipe, presets=cmd.presets, overrides=cmd.overrides, written=cmd.written)
        unsupported = self.submitter.unsupported(plan, run_cmd)
        if unsupported is not None:
            return escape(unsupported)  # its trials could not run here either
        verdict = self.submitter.gate.verdict(plan, run_cmd, user=user, submitting=submitting)
        if not verdict.allowed:
            return escape(verdict.refusal or "refused by the preflight gate")
        with self.deps.sessions() as s:
            confirmed = repos.confirmed_run_with_pins(s, recipe_name=plan.recipe, pins=plan.pins)
            if confirmed is not None:
                return None
            candidates = [
                r
                for r in repos.list_recent_runs(s, limit=200)
                if r.recipe_name == plan.recipe and r.kind == "train" and r.sweep_id is None and r.pins == plan.pins
            ]
        return smoke_first_refusal(plan, candidates)

    # --- a whole sweep ----------------------------------------------------------------------------

    def find(self, ref: str) -> Run | None:
        """The sweep `ref` names (its run), or None when it names a run that is not a sweep."""
        run = find_run(self.deps.sessions, ref)
        return run if run.kind == "sweep" else None

    def refuse_whole_sweep(self, ref: str, subcommand: str) -> None:
        """The kinds table's answer when a run's command (`logs`, `outputs`, `register`, `resume`) is given the sweep
        itself: it takes one of its trials, the best ranked one named."""
        try:
            run = self.find(ref)
        except RunError:
            return  # the command's own lookup says what is wrong with the reference
        if run is None:
            return
        try:
            trials = self.rows(run)[1]
        except RunError:
            trials = []  # no sweep record: the table's answer names a trial by the run's own records
        leader = ranked(trials, 1)
        example = leader[0].name if leader else (trials[0].name if trials else None)
        answer = kind_answer(self.deps.sessions, run, Verb(subcommand), example=example)
        if answer is not None:
            raise RunError(answer)

    def status(self, run: Run) -> Reply:
        """The sweep's card content and its leaderboard (ephemeral)."""
        text, blocks = self.render_card(run)
        sweep, rows = self.rows(run)
        _, board = render_leaderboard(sweep, rows, title=run.name, ended=run.status in ENDED)
        link = self.thread.permalink(run.channel, run.card_ts)
        out = [b for b in blocks if b.get("type") != "actions"] + board
        if link:
            out.append(context(f"<{link}|the sweep's card and thread>"))
        return Reply(text=text, blocks=out)

    def stop(self, run: Run, *, user: str) -> Reply:
        """Stop the matrix and every trial that has not ended: only the requester or an approver may."""
        if user != run.requester and user not in self.deps.people.approvers():
            raise RunError(
                f"only {mention(run.requester)} (who started it) or an approver can stop `{escape(run.name)}`"
            )
        if run.status in ENDED:
            raise RunError(f"sweep `{escape(run.name)}` has already {escape(run.status)}")
        reason = f"stopped by {mention(user)}"
        held = run.polyaxon_uuid is None
        stopped = self.stop_sweep(run, reason=reason, user=user)
        with self.deps.sessions() as s:
            repos.add_audit(s, user=user, channel=run.channel, command=f"stop {run.name}", outcome="ok", run_id=run.id)
        if held:  # cancelled before Polyaxon had it: its one message is posted (approval voided with it)
            return Reply(text=f"Cancelled sweep `{escape(run.name)}` before it reached Polyaxon.")
        self.thread.post_thread(
            run,
            f":octagonal_sign: Stop requested by {mention(user)}: the matrix and {stopped} trial(s).",
            purpose="stop",
        )
        return Reply(text=f"Stopping sweep `{escape(run.name)}` and its {stopped} unfinished trial(s).")

    def stop_sweep(self, run: Run, *, reason: str, user: str | None = None) -> int:
        """Stop the matrix run; Polyaxon stops its running trials and those not started. How many had not ended.

        A sweep still held (over budget) is cancelled instead, and what waited on it (its approval request) is
        closed by `on_cancel` in the same message, as `RunControl.stop` does for a run."""
        with self.deps.sessions() as s:
            sweep = repos.get_sweep(s, run_id=run.id or 0)
            if sweep is not None and sweep.stop_reason is None:
                repos.update_sweep(s, sweep, stop_reason=reason)
            trials = list(repos.sweep_trials(s, sweep_run_id=run.id or 0))
        if run.polyaxon_uuid is None:
            closed = [said for hook in self.on_cancel if (said := hook(run, user or "the bot"))]
            self.thread.transition(
                run,
                status="stopped",
                message=reason,
                text=" ".join([f":octagonal_sign: Cancelled before it reached Polyaxon ({reason}).", *closed]),
                pending_operation=None,
            )
            return 0
        self.deps.gateway.stop(run.polyaxon_uuid)
        self.thread.update_card(run, force=True)
        planned = sweep.trials if sweep is not None else len(trials)
        return max(0, planned - sum(1 for t in trials if t.status in ENDED))

    def compare(self, run: Run, cmd: CompareCommand, *, user: str) -> Reply:
        """`compare SWEEP [top=N]`: its best N trials by the eval metric, through the run comparison."""
        top = cmd.top or COMPARE_TOP
        _, rows = self.rows(run)
        best = ranked(rows, top)
        if len(best) < 2:
            raise RunError(
                f"sweep `{escape(run.name)}` has {len(best)} trial(s) with a final evaluation so far; comparing "
                "needs two. "
                "The leaderboard in its thread shows the others as they finish."
            )
        names = [row.name for row in best]
        return self.comparer.compare(
            CompareCommand(runs=names, metric=cmd.metric, exploratory=cmd.exploratory), user=user
        )

    # --- what the card and the leaderboard show ---------------------------------------------------

    def rows(self, run: Run) -> tuple[Sweep, list[TrialRow]]:
        """The sweep's record and its trials as leaderboard rows."""
        with self.deps.sessions() as s:
            sweep = repos.get_sweep(s, run_id=run.id or 0)
            trials = list(repos.sweep_trials(s, sweep_run_id=run.id or 0))
        if sweep is None:
            raise RunError(f"`{escape(run.name)}` has no sweep record; it was not started by `/finetune sweep`")
        return sweep, trial_rows(sweep, trials, run.eval_contract_hash)

    def render_card(self, run: Run) -> tuple[str, list[dict[str, Any]]]:
        """The sweep's card (the run thread calls this for runs of kind `sweep`)."""
        sweep, rows = self.rows(run)
        return render_sweep_card(run, sweep, rows, polyaxon_url=self.thread.polyaxon_url(run))
