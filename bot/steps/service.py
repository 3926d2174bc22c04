"""Workflow Builder steps: `start_finetune_run` and `request_promotion`, carried out through the same services as
`/finetune run` and `/finetune promote`, each completed once (bot.steps.complete).

`start_finetune_run` completes when its run is submitted (its name and card): a fine-tune takes hours, a
step that waited would hold its workflow that long, and the run's end is told where runs' ends are told (the
card, its thread, the requester's mention). `request_promotion` completes when the promotion ends: approved
(the stage moved), expired, voided, or its serving check failed; refused at once by the release rules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import TYPE_CHECKING, Any

from slack_sdk import WebClient

from bot.grammar import CommandError
from bot.polyaxon import PolyaxonUnreachableError
from bot.slack.places import PostablePlaces
from bot.slack.threads import permalink
from bot.steps.complete import StepCompletions
from bot.steps.inputs import (
    REQUEST_PROMOTION,
    START_RUN,
    Execution,
    StepInputError,
    promotion_inputs,
    read_execution,
    run_inputs,
)
from storage import repos
from storage.db import SessionFactory
from storage.models import ApprovalRequest, StepExecution

if TYPE_CHECKING:
    from bot.catalog import Catalog
    from bot.registry import RegistrationService
    from bot.release import ReleaseService
    from bot.runs import RunService

log = logging.getLogger(__name__)

PROMOTE = "promote"  # the approval action of a promotion (bot.release.requests.ACTION)
SETTLE = "step_promotion"  # the background pass that completes promotions' steps (bot.background)
# The audit's channel of a promotion asked by a workflow (the request itself goes to the version's thread).
WORKFLOW_CHANNEL = "workflow"
BOT_FAILED = "Something went wrong on the bot's side; the error is logged. Please tell the bot's maintainers."
NEEDS_POLYAXON = "this bot runs without Polyaxon (POLYAXON_HOST is not set), so it cannot start runs or promote"


class StepService:
    """Takes each execution once, carries it out, and completes it (at once, or when its promotion ends)."""

    def __init__(
        self,
        *,
        sessions: SessionFactory,
        client: WebClient,
        clock: Callable[[], datetime],
        places: PostablePlaces,
        catalog: Catalog | None = None,
        runs: RunService | None = None,
        registry: RegistrationService | None = None,
        release: ReleaseService | None = None,
    ) -> None:
        self.sessions = sessions
        self.client = client
        self.places = places
        self.catalog = catalog
        self.runs = runs
        self.registry = registry
        self.release = release
        items = runs.deps.items if runs is not None else None
        self.completions = StepCompletions(sessions=sessions, client=client, clock=clock, items=items)

    def execute(self, body: dict[str, Any]) -> None:
        """One `function_executed` delivery (after its ack); a second delivery of an execution does nothing."""
        execution = read_execution(body)
        if execution is None:
            log.warning("function_executed ignored: not a step of this app, or not in Slack's shape")
            return
        with self.sessions() as s:
            repos.record_step_execution(
                s,
                function_execution_id=execution.function_execution_id,
                callback_id=execution.callback_id,
                workflow_execution_id=execution.workflow_execution_id,
                requester=str(execution.inputs.get("requester") or "")[:32],
                inputs={k: str(v)[:2000] for k, v in execution.inputs.items()},
            )
            row = repos.get_step_execution(s, function_execution_id=execution.function_execution_id)
        # A row past `pending` has its outcome; one still pending is this delivery's, or a dead process's (whose
        # work, named after the execution, finds what it started already).
        if row is None or row.status != "pending" or row.model is not None:
            return
        log.info("step %s execution=%s", execution.callback_id, execution.function_execution_id)
        try:
            if execution.callback_id == START_RUN:
                self.start_run(execution)
            else:
                self.request_promotion(execution)
        except CommandError as exc:  # unknown recipe, a gate, not a runner, bad inputs: the step's error says why
            self.completions.fail(execution.function_execution_id, exc.message, token=execution.token)
        except PolyaxonUnreachableError as exc:
            # An outage, not the bot's bug: the workflow's error says so, and that running it again will do.
            log.warning("step %s: Polyaxon is not answering: %s", execution.callback_id, exc)
            self.completions.fail(
                execution.function_execution_id,
                f"Polyaxon at {exc.host} is not answering, so nothing was started or requested. "
                "Run the workflow again in a minute.",
                token=execution.token,
            )
        except Exception:
            # Anything else is the bot's fault and goes to the one error handler; the workflow is told so rather than
            # left waiting on a step that will never complete.
            self.completions.fail(execution.function_execution_id, BOT_FAILED, token=execution.token)
            raise

    def start_run(self, execution: Execution) -> None:
        """Start the run as `/finetune run` would, as the requester, in the given channel; complete with its card."""
        cmd, channel, requester = run_inputs(execution.inputs)
        if self.runs is None:
            if self.catalog is not None:
                self.catalog.plan(cmd)  # an unknown recipe or key is the better answer, as `--dry-run` gives it
            raise StepInputError(NEEDS_POLYAXON)
        why = self.places.refusal(self.client, channel_id=channel, channel_name="")
        if why is not None:
            raise StepInputError(f"the run's card goes in <#{channel}>, but {why}; invite the bot there first")
        key = execution.delivery_key
        submit = self.registry.submit_run if self.registry is not None else self.runs.submit
        reply = submit(cmd, user=requester, channel=channel, delivery_key=key)
        run = self.runs.submitter.existing(self.runs.submitter.plan(cmd), key)
        with self.sessions() as s:
            repos.update_step_execution(
                s, function_execution_id=execution.function_execution_id, channel=channel, run_id=run and run.id
            )
        if run is None:  # held before it became a run (nothing to name yet): what the command would have said
            raise StepInputError(f"no run was started: {reply.text}")
        link = permalink(self.client, run.channel, run.card_ts) or ""
        outputs = {"run_name": run.name, "card_permalink": link}
        self.completions.succeed(execution.function_execution_id, outputs, token=execution.token)

    def request_promotion(self, execution: Execution) -> None:
        """Ask for the promotion as `/finetune promote` would, as the requester; it completes when it ends."""
        cmd, requester = promotion_inputs(execution.inputs)
        if self.release is None:
            raise StepInputError(NEEDS_POLYAXON)
        self.release.promote(cmd, user=requester, channel=WORKFLOW_CHANNEL, delivery_key=execution.delivery_key)
        with self.sessions() as s:
            repos.update_step_execution(
                s,
                function_execution_id=execution.function_execution_id,
                model=cmd.model,
                version=cmd.version,
                stage=cmd.stage,
            )

    # --- the pass: promotions that ended, and outcomes a dead process never told ------------------------------

    def tick(self) -> int:
        """Complete the promotion steps whose promotion ended, and retell stuck outcomes; how many completed.

        The registry tells a request's end at once (`on_request_ended`); this pass is the backstop for what no
        hook reports (a serving check that failed) and for a process that died in between.
        """
        return self._settle_waiting() + self.completions.retell()

    def on_request_ended(self, request: ApprovalRequest) -> None:
        """An approval request reached a final state: complete the promotion steps waiting on it now."""
        if request.action == PROMOTE and request.version is not None and request.stage is not None:
            self._settle_waiting((request.model, request.version, request.stage))

    def _settle_waiting(self, subject: tuple[str, str, str] | None = None) -> int:
        with self.sessions() as s:
            waiting = [
                row
                for row in repos.list_step_executions(s, statuses=["pending"], callback_id=REQUEST_PROMOTION)
                if row.model is not None and (subject is None or (row.model, row.version, row.stage) == subject)
            ]
        # Each step on its own (bot.background): one whose completion Slack refuses is retried, never in the way.
        batch = self.completions.items.batch(SETTLE, [row.function_execution_id for row in waiting])
        return sum(bool(batch.attempt(row.function_execution_id, partial(self.settle, row)).value) for row in waiting)

    def settle(self, row: StepExecution) -> bool:
        """Complete one promotion step if its promotion ended; True when it completed now."""
        outcome = self.promotion_outcome(row)
        if outcome is None:
            return False
        outputs, error = outcome
        execution_id = row.function_execution_id
        if error is not None:
            return self.completions.fail(execution_id, error)
        return self.completions.succeed(execution_id, outputs or {})

    def promotion_outcome(self, row: StepExecution) -> tuple[dict[str, str] | None, str | None] | None:
        """(outputs, None) when approved, (None, error) when it ended otherwise, None while it waits."""
        model, version, stage = str(row.model), str(row.version), str(row.stage)
        title = f"{model}:{version} to {stage}"
        with self.sessions() as s:
            requests = [
                r
                for r in repos.list_approval_requests(s, model=model, action=PROMOTE)
                if r.version == version and r.stage == stage and r.created_at >= row.created_at
            ]
            checks = repos.promotion_checks_since(s, model=model, version=version, stage=stage, since=row.created_at)
        if requests:
            request = requests[-1]
            link = permalink(self.client, request.channel, request.message_ts) or ""
            if request.status == "promoted":
                return {"outcome": "approved", "request_permalink": link}, None
            if request.status == "expired":
                return None, f"The approval request to promote {title} expired unapproved: {link}"
            if request.status == "voided":
                return None, f"The approval request to promote {title} was voided ({request.error}): {link}"
            return None  # open, approved or promoting: the approvers and the stage move are under way
        failed = [c for c in checks if c.status == "failed"]
        if failed and not any(c.status in ("running", "passed") for c in checks[checks.index(failed[-1]) + 1 :]):
            return None, f"The serving check of {title} failed (check #{failed[-1].id}), so no approval was asked"
        return None
