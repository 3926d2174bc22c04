"""Serving checks: start one for a registered version (or reuse a passed one), and settle it when its run ends.

A serving check is a run of kind `serving` whose card and posts live in the version's thread (the thread of
the run the version was registered from). When its run ends, `settle` reads the report the job wrote
(`outputs/serving_report.json`), judges it against the recipe's budgets, stores the verdict (once: a
conditional update), posts the report in the version's thread and hands a passed check to the promotion.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from bot.registry.policy import CriterionResult
from bot.release.policy import judge_serving_report
from bot.release.render import render_serving_report
from bot.runs.deps import RunDeps
from bot.runs.errors import RunError
from bot.runs.reports import read_run_report
from bot.runs.submit import Submitter
from bot.runs.thread import RunThread
from bot.slack.blocks import clip, escape
from storage import repos
from storage.models import Registration, Run, ServingCheck
from storage.repos.runs import TERMINAL_STATUSES

if TYPE_CHECKING:
    from sqlmodel import Session

log = logging.getLogger(__name__)

REPORT_PATH = "outputs/serving_report.json"
REPORT_MAX_BYTES = 2 * 1024 * 1024


def missing_report(status: str) -> dict[str, Any]:
    """The report of a check whose job wrote none (it failed before, or was stopped)."""
    return {"error": f"the serving check's run ended {status} without writing {REPORT_PATH}"}


class ServingChecks:
    """Starts serving checks of registered versions and settles them once their run has ended."""

    def __init__(self, deps: RunDeps, thread: RunThread, submitter: Submitter) -> None:
        self.deps = deps
        self.thread = thread
        self.submitter = submitter
        # Told of every check once it is settled (the promotion posts its request for a passed one).
        self.on_settled: Callable[[ServingCheck], None] | None = None

    def ensure(
        self,
        registration: Registration,
        version_run: Run,
        *,
        checkpoint: str,
        stage: str,
        user: str,
        delivery_key: str,
    ) -> tuple[ServingCheck, bool]:
        """A passed check of this version and serving spec to reuse, or a new one started: (check, reused)."""
        plan, digest = self.deps.catalog.plan_serving_check(
            version_run.recipe_name, checkpoint=checkpoint, model_run=version_run.polyaxon_uuid or ""
        )
        with self.deps.sessions() as s:
            passed = repos.latest_serving_check(
                s, registration_id=registration.id or 0, spec_digest=digest, statuses=["passed"]
            )
            running = repos.latest_serving_check(
                s, registration_id=registration.id or 0, spec_digest=digest, statuses=["running"]
            )
        if passed is not None:
            return passed, True
        label = f"`{escape(registration.model)}:{escape(registration.version)}`"
        if running is not None:
            raise RunError(
                f"a serving check of {label} is running already (#{running.id}); its report and, when it passes, the "
                f"approval request to promote to {escape(str(running.stage))} follow in the version's thread"
            )
        created: list[ServingCheck] = []

        def record(s: Session, run: Run) -> None:
            # The check's card and posts go in the version's thread; its row is written with its run.
            repos.update_run(
                s, run, thread_ts=version_run.thread_ts or version_run.card_ts, channel=version_run.channel
            )
            created.append(
                repos.create_serving_check(
                    s,
                    registration_id=registration.id,
                    model=registration.model,
                    version=registration.version,
                    spec_digest=digest,
                    prompt_set_digest=str(plan.pins.get("prompt_set") or ""),
                    run_id=run.id,
                    stage=stage,
                    requester=user,
                    channel=version_run.channel,
                )
            )

        _, run = self.submitter.start(
            plan,
            overrides={},
            notes=[],
            user=user,
            channel=version_run.channel,
            delivery_key=delivery_key,
            record=record,
        )
        if run is None or not created:  # the same delivery again: the check it started
            existing = self.submitter.existing(plan, delivery_key)
            with self.deps.sessions() as s:
                check = repos.serving_check_for_run(s, run_id=existing.id or 0) if existing else None
            if check is None:
                raise RunError(f"the serving check of {label} could not be recorded; try again")
            return check, False
        return created[0], False

    def settle(self) -> int:
        """Settle every check whose run has ended: judge and store its report, post it once; how many now."""
        from bot.polyaxon import GatewayError

        with self.deps.sessions() as s:
            waiting = [(c, r) for c, r in repos.running_serving_checks(s) if r.status in TERMINAL_STATUSES]
        settled = 0
        for check, run in waiting:
            try:
                report = self.read_report(run)
            except GatewayError as exc:
                log.warning("serving check %s: report not readable yet: %s", run.name, exc)
                continue
            verdict = self.judge(check, run, report)
            passed = all(r.passed for r in verdict)
            with self.deps.sessions() as s:
                won = repos.finish_serving_check(
                    s,
                    check_id=check.id or 0,
                    status="passed" if passed else "failed",
                    report=report,
                    verdict=[r.model_dump() for r in verdict],
                    finished_at=self.deps.clock(),
                )
                fresh = repos.get_serving_check(s, check_id=check.id or 0)
            if not won or fresh is None:
                continue
            self.tell(fresh, run, report, verdict)
            settled += 1
            if self.on_settled is not None:
                self.on_settled(fresh)
        return settled

    def judge(self, check: ServingCheck, run: Run, report: dict[str, Any]) -> list[CriterionResult]:
        """The check's verdict under the recipe's budgets as they are now."""
        try:
            spec = self.deps.catalog.recipe(run.recipe_name).spec.serving
        except Exception as exc:  # a recipe removed meanwhile: judge without budgets, and say so
            log.warning("serving check %s: recipe %s: %s", run.name, run.recipe_name, exc)
            spec = None
        budgets = spec.budgets.model_dump() if spec is not None else {}
        return judge_serving_report(report, budgets, run_status=run.status, prompt_set_digest=check.prompt_set_digest)

    def read_report(self, run: Run) -> dict[str, Any]:
        """The report the job wrote, or one that says it wrote none (GatewayError while Polyaxon is down)."""
        report = read_run_report(self.deps.gateway, run, REPORT_PATH, max_bytes=REPORT_MAX_BYTES)
        return report if report is not None else missing_report(run.status)

    def tell(self, check: ServingCheck, run: Run, report: dict[str, Any], verdict: list[CriterionResult]) -> None:
        """The report in the version's thread (the check's run posts there)."""
        text, blocks = render_serving_report(
            report,
            verdict,
            label=f"{check.model}:{check.version}",
            check_id=check.id or 0,
            stage=check.stage,
            run_name=run.name,
        )
        self.thread.post_thread(run, escape(clip(text, 3000)), blocks=blocks, purpose="serving_report")
        self.thread.update_card(run, force=True)
        with self.deps.sessions() as s:
            repos.add_audit(
                s,
                user=check.requester,
                channel=check.channel,
                command=f"serving check {check.id} of {check.model}:{check.version}",
                outcome="ok" if check.status == "passed" else "refused",
                detail="; ".join(f"{r.name}: {'pass' if r.passed else 'FAIL'} ({r.evidence})" for r in verdict)[:2000],
                run_id=run.id,
            )
