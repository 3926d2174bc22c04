"""`/finetune preflight`: submit the short validation run of a distributed recipe, and settle it when it ends.

The preflight is a run like any other (its own card and thread, watched by the watcher, stopped with
`stop`), of kind `preflight`, recorded in `preflights` with the gate key it validates. When its run ends,
`settle` reads the report the job wrote (`outputs/preflight_report.json`), stores it as the evidence,
posts it in the preflight's thread once, and from then on `run` of the same pins and presets passes the gate.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from bot.catalog.cost import cost_profile
from bot.grammar import PreflightCommand, RunCommand
from bot.preflight.report import memory_refused_report, missing_report, render_report
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.gate import report_lines
from bot.runs.reports import read_run_report
from bot.runs.submit import Submitter
from bot.runs.thread import RunThread
from bot.slack.blocks import escape, mention
from storage import repos
from storage.models import Preflight, Run
from storage.repos.runs import TERMINAL_STATUSES

if TYPE_CHECKING:
    from bot.catalog import Catalog, Plan

log = logging.getLogger(__name__)

REPORT_PATH = "outputs/preflight_report.json"
REPORT_MAX_BYTES = 1024 * 1024


def with_cost(catalog: Catalog, plan: Plan) -> Plan:
    """The preflight's plan with its cost profile: a preflight holds what its presets give while it runs, so its
    card says what it used and `/finetune usage` counts it like every run."""
    if plan.cost is None:
        presets = [catalog.presets[name] for name in plan.presets if name in catalog.presets]
        plan.cost = cost_profile(plan.resources, presets, catalog.pricing, plan.operation)
    return plan


class PreflightService:
    """Starts preflights and settles them once their run has ended."""

    def __init__(self, deps: RunDeps, thread: RunThread, submitter: Submitter) -> None:
        self.deps = deps
        self.thread = thread
        self.submitter = submitter

    def start(self, cmd: PreflightCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """Compile and submit the preflight; an estimate that cannot fit fails it at once, with nothing submitted."""
        if not self.deps.people.may_run(user):
            raise RunError(f"{mention(user)} may not start runs here; ask someone in FINETUNE_RUNNERS")
        run_cmd = RunCommand(**cmd.model_dump(exclude={"name"}))
        plan = with_cost(self.deps.catalog, self.deps.catalog.plan_preflight(run_cmd))
        if plan.over_memory_budget and plan.memory is not None:
            report = memory_refused_report(plan.memory.summary(), plan.fitting_presets)
            self._record(plan, user=user, channel=channel, run=None, report=report)
            lines = "\n".join(f"• {escape(line)}" for line in report_lines(report))
            raise RunError(
                f"Preflight of `{escape(plan.recipe)}` failed before submission (nothing was submitted):\n{lines}"
            )
        reply, run = self.submitter.start_command(plan, run_cmd, user=user, channel=channel, delivery_key=delivery_key)
        if run is None:  # the same delivery again: record the preflight a crash may have kept it from recording
            run = self.submitter.existing(plan, delivery_key)
            with self.deps.sessions() as s:
                if run is None or repos.preflight_for_run(s, run_id=run.id or 0) is not None:
                    return reply
        self._record(plan, user=user, channel=channel, run=run, report=None)
        return reply

    def _record(self, plan: Plan, *, user: str, channel: str, run: Run | None, report: dict[str, Any] | None) -> None:
        """Store the preflight of this gate key: running with its run, or failed at once with its report."""
        with self.deps.sessions() as s:
            row = repos.create_preflight(
                s,
                gate_key=plan.gate_key,
                recipe_name=plan.recipe,
                presets=plan.presets,
                pins=plan.pins,
                run_id=run.id if run is not None else None,
                requester=user,
                channel=channel,
            )
            if report is not None:
                repos.finish_preflight(s, row, status="failed", report=report)

    def settle(self) -> int:
        """Settle every preflight whose run has ended: store its report, post it once; how many were settled."""
        from bot.polyaxon import GatewayError

        with self.deps.sessions() as s:
            waiting = [(p, r) for p, r in repos.running_preflights(s) if r.status in TERMINAL_STATUSES]
        settled = 0
        for preflight, run in waiting:
            try:
                report = self.read_report(run)
            except GatewayError as exc:
                log.warning("preflight %s: report not readable yet: %s", run.name, exc)
                continue
            passed = bool(report.get("passed")) and run.status == "succeeded"
            with self.deps.sessions() as s:
                fresh = s.get(Preflight, preflight.id)
                if fresh is None:
                    continue
                repos.finish_preflight(s, fresh, status="passed" if passed else "failed", report=report)
            self.tell(run, report, preflight)
            settled += 1
        return settled

    def read_report(self, run: Run) -> dict[str, Any]:
        """The report the preflight job wrote, or one that says it wrote none."""
        report = read_run_report(self.deps.gateway, run, REPORT_PATH, max_bytes=REPORT_MAX_BYTES)
        return report if report is not None else missing_report(run.status)

    def tell(self, run: Run, report: dict[str, Any], preflight: Preflight) -> None:
        """Post the report in the preflight's thread, once (a restarted bot finds it was posted)."""
        with self.deps.sessions() as s:
            if repos.find_posted_message(s, run_id=run.id or 0, purpose="preflight_report") is not None:
                return
        command = " ".join(
            [f"/finetune run recipe={preflight.recipe_name}"]
            + ([f"preset={','.join(preflight.presets)}"] if preflight.presets else [])
            + [f"{k}={v}" for k, v in run.overrides.items()]
        )
        text, blocks = render_report(report, recipe=preflight.recipe_name, run_command=command)
        self.thread.post_thread(run, text, blocks=blocks, purpose="preflight_report")
        self.thread.update_card(run, force=True)
