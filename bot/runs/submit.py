"""Starting runs: plan, authorise, record, post the card, submit to Polyaxon, and retry while Polyaxon is down."""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from bot.grammar import RunCommand
from bot.redact import redact
from bot.runs.capability import unsupported_reason
from bot.runs.chain import plan_run
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.gate import PreflightGate
from bot.runs.lost import LostRuns
from bot.runs.thread import RunThread
from bot.slack.blocks import escape, mention
from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from sqlmodel import Session

    from bot.catalog import Plan


# A submission this old that never reached Polyaxon belongs to a process that died in the middle of it.
STALE_SUBMISSION = timedelta(minutes=1)


def run_name_for(recipe: str, key: str) -> str:
    """The Polyaxon run name (a slug) for a submission: the recipe plus a digest of the delivery key."""
    return f"{recipe}-{hashlib.sha256(key.encode()).hexdigest()[:10]}"


class Submitter:
    """`/finetune run`: one run per delivery, submitted under a name that makes a second submission impossible."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread
        # A passed preflight counts only while Polyaxon still has its run (bot.runs.lost).
        self.gate = PreflightGate(deps.sessions, deps.people, lost=LostRuns(deps, thread))

    def plan(self, cmd: RunCommand) -> Plan:
        """Compile the command (PlanError for anything the catalog refuses)."""
        return plan_run(self.deps.catalog, self.deps.sessions, cmd)

    def submit(self, cmd: RunCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """Plan, pass the memory and preflight gates, then start the run (`start`)."""
        plan, forced = self.gated_plan(cmd, user)
        reply, _ = self.start_command(plan, cmd, user=user, channel=channel, delivery_key=delivery_key, forced=forced)
        return reply

    def authorised_plan(self, cmd: RunCommand, user: str) -> tuple[Plan, bool]:
        """The plan of a user who may run, past the memory gate; whether an approver forced it (RunError if not)."""
        if not self.deps.people.may_run(user):
            raise RunError(f"{mention(user)} may not start runs here; ask someone in FINETUNE_RUNNERS")
        plan = self.plan(cmd)
        # Before every other gate: no approval, force or preflight makes a kind runnable that this deployment lacks.
        unsupported = self.unsupported(plan, cmd)
        if unsupported is not None:
            raise RunError(escape(unsupported))  # it names the recipe and its kind, from the catalog
        return plan, self.memory_gate(plan, cmd, user)

    def unsupported(self, plan: Plan, cmd: RunCommand) -> str | None:
        """Why this deployment cannot execute the plan's run kind, with the way forward; None when it can."""
        kinds = self.deps.settings.finetune.unsupported_run_kinds
        return unsupported_reason(plan, kinds, preflight=self.gate.command(plan, cmd))

    def gated_plan(self, cmd: RunCommand, user: str) -> tuple[Plan, bool]:
        """`authorised_plan`, past the smoke-first gate too (never skipped here: a skip is an approval)."""
        plan, forced = self.authorised_plan(cmd, user)
        verdict = self.gate.verdict(plan, cmd.model_copy(update={"skip_preflight": False}), user=user)
        if not verdict.allowed:
            raise RunError(escape(verdict.refusal or "refused by the preflight gate"))
        plan.validation = verdict.validation
        return plan, forced

    @staticmethod
    def name_for(plan: Plan, delivery_key: str) -> str:
        """The run name a delivery gives this plan (a preflight's says so)."""
        prefix = plan.recipe if plan.kind == "train" else f"{plan.recipe}-{plan.kind}"
        return run_name_for(prefix, delivery_key)

    def existing(self, plan: Plan, delivery_key: str) -> Run | None:
        """The run this delivery already started, if any (a delivery carried out again after a crash)."""
        with self.deps.sessions() as s:
            return repos.get_run_by_name(s, name=self.name_for(plan, delivery_key))

    def start_command(
        self,
        plan: Plan,
        cmd: RunCommand,
        *,
        user: str,
        channel: str,
        delivery_key: str,
        forced: bool = False,
        hold: bool = False,
    ) -> tuple[Reply, Run | None]:
        """`start` with the command's overrides and notes."""
        return self.start(
            plan,
            overrides=dict(cmd.overrides),
            notes=cmd.notes,
            user=user,
            channel=channel,
            delivery_key=delivery_key,
            forced=forced,
            hold=hold,
        )

    def start(
        self,
        plan: Plan,
        *,
        overrides: dict[str, Any],
        notes: Sequence[str],
        user: str,
        channel: str,
        delivery_key: str,
        forced: bool = False,
        hold: bool = False,
        record: Callable[[Session, Run], None] | None = None,
    ) -> tuple[Reply, Run | None]:
        """Record, post the card, submit; failures are told in the card's thread. The run, None when it existed.

        `hold` records and cards the run as `awaiting_approval` with its operation, and submits nothing: an
        approval (a preflight skip) releases it through `submit_to_polyaxon`. `record` stores what belongs with
        the run (a sweep's space) in the same transaction, before its card is rendered.
        """
        name = self.name_for(plan, delivery_key)
        try:
            with self.deps.sessions() as s:
                existing = repos.get_run_by_name(s, name=name)
                if existing is not None:  # the same delivery again: nothing new
                    return Reply(text=f"Run `{escape(name)}` is already submitted."), None
                run = repos.create_run(
                    s,
                    name=name,
                    kind=plan.kind,
                    recipe_name=plan.recipe,
                    recipe_hash=plan.recipe_hash,
                    catalog_revision=plan.catalog_revision,
                    component=plan.component,
                    params=plan.params,
                    overrides=overrides,
                    presets=plan.presets,
                    pins=plan.pins,
                    # A sweep is as comparable as its trials, which share its pins and eval contract.
                    comparable=plan.comparable and plan.kind in ("train", "sweep"),
                    eval_contract=plan.eval_contract,
                    eval_contract_hash=plan.eval_contract_hash,
                    requester=user,
                    channel=channel,
                    status="awaiting_approval" if hold else "submitting",
                    validation=plan.validation,
                    policy=plan.policy or None,
                    # Its cost rules as its presets said when it was submitted (a sweep's: each trial's).
                    cost=plan.cost.model_dump(mode="json") if plan.cost is not None else None,
                    # Kept until Polyaxon has it: a process that dies before submitting leaves it for the next tick.
                    pending_operation={"operation": plan.operation, "tags": list(plan.tags)},
                )
                if record is not None:
                    record(s, run)
                verb = plan.kind if plan.kind in ("preflight", "sweep") else "run"
                repos.add_audit(
                    s, user=user, channel=channel, command=f"{verb} recipe={plan.recipe}", outcome="ok", run_id=run.id
                )
                if forced and plan.memory is not None:
                    repos.add_audit(
                        s,
                        user=user,
                        channel=channel,
                        command=f"run recipe={plan.recipe} --force",
                        outcome="ok",
                        detail=f"submitted over the memory estimate: {plan.memory.summary()}",
                        run_id=run.id,
                    )
        except repos.DuplicateError:
            # Another delivery of the same submission (a form submitted twice at once) took the name first.
            return Reply(text=f"Run `{escape(name)}` is already submitted."), None
        self.thread.post_card(run)
        if forced and plan.memory is not None:
            self.thread.post_thread(
                run,
                f":warning: Submitted with `--force` by {mention(user)} although the memory estimate does not fit: "
                f"{escape(plan.memory.summary())}",
                purpose="forced",
            )
        for warning in plan.warnings:
            self.thread.post_thread(run, f":warning: {escape(warning)}", purpose="warning")
        if hold:
            return Reply(text=f"`{escape(name)}` is recorded and held."), run
        self.submit_to_polyaxon(run, plan.operation, plan.tags)
        extra = "".join(f"\n{escape(note)}" for note in notes)
        what = {"preflight": "a preflight of ", "sweep": "a sweep of "}.get(plan.kind, "")
        return Reply(
            text=f"Planned {what}{escape(plan.recipe)} as `{escape(name)}`; the card is in <#{escape(channel)}>.{extra}"
        ), run

    def memory_gate(self, plan: Plan, cmd: RunCommand, user: str) -> bool:
        """Refuse a run whose memory estimate does not fit its presets, unless an approver forces it; forced?"""
        if not plan.over_memory_budget:
            return False
        if not cmd.force:
            raise RunError(memory_refusal(plan))
        if user not in self.deps.people.approvers():
            raise RunError(
                f"only an approver may `--force` a run over its memory estimate (FINETUNE_APPROVERS); "
                f"{mention(user)} is not one.\n{memory_refusal(plan)}"
            )
        return True

    def submit_to_polyaxon(self, run: Run, operation: dict[str, Any], tags: Sequence[str]) -> bool:
        """Submit (idempotent on the run name); on failure the run waits in `pending_submit` and is retried."""
        from bot.polyaxon import GatewayError

        try:
            info = self.deps.gateway.submit(
                operation,
                name=run.name,
                tags=list(tags),
                description=f"/finetune run recipe={run.recipe_name} by {run.requester}",
            )
        except GatewayError as exc:
            first = run.status != "pending_submit"
            with self.deps.sessions() as s:
                fresh = self.thread.reload(s, run)
                repos.update_run(
                    s,
                    fresh,
                    status="pending_submit",
                    last_activity_at=self.deps.clock(),
                    pending_operation={"operation": operation, "tags": list(tags)},
                    # The card says why it waits (its Waiting line), not only the thread's first post.
                    condition=f"Polyaxon has not taken it yet ({redact(str(exc), extra_secrets=self.deps.secrets)})"[
                        :500
                    ],
                )
                run = fresh
            if first:
                reason = escape(redact(str(exc), extra_secrets=self.deps.secrets))
                self.thread.post_thread(
                    run,
                    f":warning: Polyaxon did not take the run: {reason}\n"
                    "The bot retries the submission on every watcher tick (same run name, so never twice); "
                    "`/finetune stop` cancels it.",
                    purpose="submit_error",
                )
            self.thread.update_card(run, force=True)
            return False
        self.thread.transition(
            run,
            status=info.status or "created",
            message="submitted to Polyaxon",
            text=f"Submitted to Polyaxon as `{escape(str(info.uuid))}` ({escape(str(info.status))}).",
            polyaxon_uuid=info.uuid,
            pending_operation=None,
            condition=None,  # it no longer waits for the submission
            last_activity_at=self.deps.clock(),
        )
        return True

    def retry_pending(self) -> int:
        """Retry submissions that failed because Polyaxon was unreachable, or that a process died in the middle of;
        how many went through (each run isolated: bot.runs.pending)."""
        from bot.runs.pending import PendingSubmissions

        return PendingSubmissions(self).retry()


def memory_refusal(plan: Plan) -> str:
    """Why a run over its memory estimate is refused, with the presets it would fit and the other ways out."""
    assert plan.memory is not None
    presets = ",".join(plan.presets) or "(none)"
    lines = [f"`{escape(plan.recipe)}` on `preset={escape(presets)}` does not fit: {escape(plan.memory.summary())}."]
    if plan.fitting_presets:
        examples = ", ".join(f"`preset={escape(name)}`" for name in plan.fitting_presets)
        lines.append(
            f"It fits on {examples}, e.g. "
            f"`/finetune run recipe={escape(plan.recipe)} preset={escape(plan.fitting_presets[0])}`."
        )
    else:
        lines.append("No shipped preset fits it as configured.")
    lines.append(
        "Or train lighter: use_peft=true (LoRA), a smaller per_device_train_batch_size or max_length. "
        "An approver may submit it anyway with `--force` (audited)."
    )
    return "\n".join(lines)
