"""`/finetune resume`: a new run that starts with a copy of the parent's artifacts and loads its checkpoint."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.grammar import ResumeCommand, RunCommand
from bot.redact import redact
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.lookup import find_run
from bot.runs.submit import run_name_for
from bot.runs.thread import RunThread
from bot.slack.blocks import escape
from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from bot.catalog import Plan

TERMINAL = repos.TERMINAL_STATUSES


class Resumer:
    """Resumes a finished, failed or stopped run; refused with a diff when the recipe moved on."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread

    def resume(self, cmd: ResumeCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """A new run that loads the parent's checkpoint; refused with a diff when the recipe moved on."""
        parent = find_run(self.deps.sessions, cmd.run)
        if not self.deps.people.may_run(user):
            raise RunError(f"<@{user}> may not start runs here; ask someone in FINETUNE_RUNNERS")
        if parent.polyaxon_uuid is None or parent.status not in TERMINAL:
            raise RunError(f"run `{parent.name}` is {parent.status}; resume a run that has finished, failed or stopped")
        plan = self.deps.catalog.plan(
            RunCommand(recipe=parent.recipe_name, presets=parent.presets, overrides=parent.overrides)
        )
        diff = resume_diff(parent, plan)
        if diff:
            raise RunError(
                f"can't resume `{parent.name}`: its checkpoint does not fit what the recipe gives now:\n"
                + "\n".join(f"• {line}" for line in diff)
            )
        # Polyaxon's copy starts the new run with the parent's artifacts copied into its own folder, so
        # the trainer finds the parent's checkpoints under its own outputs (any artifacts store, no paths).
        checkpoint = "latest" if cmd.checkpoint == "latest" else f"checkpoint-{cmd.checkpoint.removeprefix('step-')}"
        name = run_name_for(parent.recipe_name, delivery_key)
        with self.deps.sessions() as s:
            if repos.get_run_by_name(s, name=name) is not None:
                return Reply(text=f"Run `{name}` is already submitted.")
            child = repos.create_run(
                s,
                name=name,
                recipe_name=parent.recipe_name,
                recipe_hash=plan.recipe_hash,
                component=parent.component,
                params={**parent.params, "resume_from": checkpoint},
                overrides=parent.overrides,
                presets=parent.presets,
                pins=parent.pins,
                comparable=parent.comparable,
                eval_contract=parent.eval_contract,
                eval_contract_hash=parent.eval_contract_hash,
                requester=user,
                channel=channel,
                status="submitting",
                parent_run_id=parent.id,
            )
            repos.add_audit(
                s,
                user=user,
                channel=channel,
                command=f"resume {parent.name} {cmd.checkpoint}",
                outcome="ok",
                run_id=child.id,
            )
        self.thread.post_card(child)
        from bot.polyaxon import GatewayError

        try:
            info = self.deps.gateway.copy_run(
                parent.polyaxon_uuid,
                name=name,
                params={"resume_from": checkpoint},
                tags=plan.tags,
                description=f"resume of {parent.name} by {user}",
            )
        except GatewayError as exc:
            reason = escape(redact(str(exc), extra_secrets=self.deps.secrets))
            self.thread.transition(
                child,
                status="submit_failed",
                message=str(exc)[:500],
                text=f":x: Polyaxon refused the resume: {reason}\nTry `/finetune resume {parent.name}` again.",
            )
            return Reply(text="Polyaxon refused the resume; see the card's thread.")
        child = self.thread.transition(
            child,
            status=info.status or "created",
            message=f"copy of {parent.polyaxon_uuid}",
            text=f"Loads `{checkpoint}` of `{parent.name}` (Polyaxon `{info.uuid}`).",
            polyaxon_uuid=info.uuid,
        )
        child_link = self.thread.permalink(child.channel, child.card_ts)
        self.thread.post_thread(
            parent,
            f":leftwards_arrow_with_hook: Resumed by <@{user}> from {checkpoint} as "
            f"{f'<{child_link}|{child.name}>' if child_link else child.name}.",
            purpose="resume",
        )
        return Reply(text=f"Resuming `{parent.name}` as `{name}`.")


def resume_diff(parent: Run, plan: Plan) -> list[str]:
    """Field-by-field reasons the parent's checkpoint does not fit the recipe as it compiles now."""
    diff: list[str] = []
    for key in sorted(set(parent.pins) | set(plan.pins)):
        old, new = parent.pins.get(key), plan.pins.get(key)
        if old != new:
            diff.append(f"pin `{key}`: `{old}` (parent) vs `{new}` (now)")
    for key in ("model_name_or_path", "model_revision", "max_length", "use_peft", "lora_r", "dtype"):
        old, new = parent.params.get(key), plan.params.get(key)
        if old != new:
            diff.append(f"`{key}`: `{old}` (parent) vs `{new}` (now)")
    if parent.recipe_hash != plan.recipe_hash and not diff:
        return []  # the recipe file changed elsewhere (docs, bounds); the copy reuses the parent's own spec
    return diff
