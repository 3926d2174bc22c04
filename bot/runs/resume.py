"""`/finetune resume`: a new run that starts with a copy of the parent's artifacts and loads its checkpoint."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bot.grammar import ResumeCommand, RunCommand
from bot.redact import redact
from bot.runs.admit import find_run_for
from bot.runs.chain import plan_run
from bot.runs.deps import RunDeps
from bot.runs.errors import Reply, RunError
from bot.runs.kinds import Verb
from bot.runs.submit import run_name_for
from bot.runs.thread import RunThread
from bot.slack.blocks import escape, mention
from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from bot.catalog import Plan
    from bot.polyaxon import PolyaxonGateway, RunInfo

TERMINAL = repos.TERMINAL_STATUSES


class Resumer:
    """Resumes a finished, failed or stopped run; refused with a diff when the recipe moved on."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread

    def resume(self, cmd: ResumeCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """A new run that loads one complete checkpoint of the parent; refused when there is none to load,
        when the parent succeeded and the schedule is not extended, or with a diff when the recipe moved on."""
        parent = find_run_for(self.deps.sessions, cmd.run, Verb.RESUME)
        if not self.deps.people.may_run(user):
            raise RunError(f"{mention(user)} may not start runs here; ask someone in FINETUNE_RUNNERS")
        if parent.polyaxon_uuid is None or parent.status not in TERMINAL:
            raise RunError(
                f"run `{escape(parent.name)}` is {escape(parent.status)}; "
                "resume a run that has finished, failed or stopped"
            )
        outputs = self.deps.gateway.get_run(parent.polyaxon_uuid, with_conditions=False).outputs
        step = choose_checkpoint(parent, outputs, cmd.checkpoint)
        total = _int(outputs.get("max_steps")) or _int(parent.params.get("max_steps"))
        if cmd.max_steps is not None and cmd.max_steps <= step:
            raise RunError(f"max_steps={cmd.max_steps} ends before the checkpoint's step {step}: give more steps")
        if parent.status == "succeeded" and (cmd.max_steps is None or (total is not None and cmd.max_steps <= total)):
            raise RunError(
                f"`{escape(parent.name)}` succeeded: it finished its schedule ({total or step} steps), "
                "so resuming it would train nothing new. To train further, extend the schedule: "
                f"`/finetune resume {escape(parent.name)} max_steps={max(total or step, step) * 2}`."
            )
        # Stored values are typed; an int stored as 1000.0 by an older bot is still the int 1000.
        # `resume_from` was an override once; only resume sets it now.
        overrides = {
            k: int(v) if isinstance(v, float) and v.is_integer() else v
            for k, v in parent.overrides.items()
            if k != "resume_from"
        }
        if cmd.max_steps is not None:
            overrides["max_steps"] = cmd.max_steps
        plan = plan_run(
            self.deps.catalog,
            self.deps.sessions,
            RunCommand(recipe=parent.recipe_name, presets=parent.presets, overrides=overrides),
        )
        diff = resume_diff(parent, plan)
        if diff:
            raise RunError(
                f"can't resume `{escape(parent.name)}`: its checkpoint does not fit what the recipe gives now:\n"
                + "\n".join(f"• {escape(line)}" for line in diff)
            )
        checkpoint = f"checkpoint-{step}"
        patch: dict[str, Any] = resume_patch(step)
        if cmd.max_steps is not None:
            patch["max_steps"] = plan.params.get("max_steps", cmd.max_steps)
        # Polyaxon's copy starts the new run with the chosen checkpoint copied into its own outputs, so the
        # trainer finds it there (any artifacts store, no paths); the other checkpoints stay with the parent.
        name = run_name_for(parent.recipe_name, delivery_key)
        with self.deps.sessions() as s:
            if repos.get_run_by_name(s, name=name) is not None:
                return Reply(text=f"Run `{escape(name)}` is already submitted.")
            child = repos.create_run(
                s,
                **inherited_fields(parent),
                name=name,
                recipe_hash=plan.recipe_hash,
                catalog_revision=plan.catalog_revision,
                params={**parent.params, **patch},
                overrides=overrides,
                requester=user,
                channel=channel,
                status="submitting",
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
            info = copy_from_checkpoint(
                self.deps.gateway,
                parent.polyaxon_uuid,
                name=name,
                step=step,
                patch=patch,
                tags=plan.tags,
                description=f"resume of {parent.name} by {user}",
            )
        except GatewayError as exc:
            reason = escape(redact(str(exc), extra_secrets=self.deps.secrets))
            self.thread.transition(
                child,
                status="submit_failed",
                message=str(exc)[:500],
                text=f":x: Polyaxon refused the resume: {reason}\nTry `/finetune resume {escape(parent.name)}` again.",
            )
            return Reply(text="Polyaxon refused the resume; see the card's thread.")
        child = self.thread.transition(
            child,
            status=info.status or "created",
            message=f"copy of {parent.polyaxon_uuid}",
            text=f"Loads `{checkpoint}` (step {step}) of `{escape(parent.name)}`"
            + schedule_text(cmd.max_steps, total)
            + f" (Polyaxon `{escape(str(info.uuid))}`).",
            polyaxon_uuid=info.uuid,
        )
        child_link = self.thread.permalink(child.channel, child.card_ts)
        self.thread.post_thread(
            parent,
            f":leftwards_arrow_with_hook: Resumed by {mention(user)} from {checkpoint} as "
            f"{f'<{child_link}|{escape(child.name)}>' if child_link else escape(child.name)}.",
            purpose="resume",
        )
        return Reply(text=f"Resuming `{escape(parent.name)}` as `{escape(name)}`.")


def schedule_text(wanted: int | None, total: int | None) -> str:
    """`, schedule extended from 300 to 600 steps` (shortened, or set where the parent's is unknown): what
    `max_steps=` did to the parent's schedule; empty without it."""
    if wanted is None:
        return ""
    if total is None:
        return f", schedule set to {wanted} steps"
    if wanted == total:
        return f", schedule unchanged ({total} steps)"
    return f", schedule {'extended' if wanted > total else 'shortened'} from {total} to {wanted} steps"


def inherited_fields(parent: Run) -> dict[str, Any]:
    """What a child run (a resume, an automatic retry) keeps of its parent: recipe, component, presets, pins,
    eval contract and cost profile, and the link to it."""
    return {
        "recipe_name": parent.recipe_name,
        "component": parent.component,
        "presets": parent.presets,
        "pins": parent.pins,
        "comparable": parent.comparable,
        "eval_contract": parent.eval_contract,
        "eval_contract_hash": parent.eval_contract_hash,
        "parent_run_id": parent.id,
        # The same presets hold the same accelerators: its own hours are counted when it ends.
        "cost": {k: v for k, v in parent.cost.items() if not k.startswith("used_")} if parent.cost else None,
    }


def resume_patch(step: int | None) -> dict[str, Any]:
    """The input a child run loads its checkpoint by (`resume_from`); nothing for a fresh start."""
    return {"resume_from": f"checkpoint-{step}"} if step is not None else {}


def copy_from_checkpoint(
    gateway: PolyaxonGateway,
    parent_uuid: str,
    *,
    name: str,
    step: int | None,
    patch: Mapping[str, Any],
    tags: Sequence[str],
    description: str,
) -> RunInfo:
    """The child run: a Polyaxon copy of the parent's spec, `patch` over its inputs, that starts with the
    parent's `checkpoint-<step>` copied into its own outputs (nothing copied when `step` is None: a fresh start).

    The one path `/finetune resume` and automatic retries take; idempotent on `name`.
    """
    return gateway.copy_run(
        parent_uuid,
        name=name,
        params={**patch, **resume_patch(step)},
        tags=tags,
        description=description,
        copy_dirs=[f"outputs/checkpoint-{step}"] if step is not None else [],
    )


def checkpoint_steps(outputs: Mapping[str, Any]) -> list[int]:
    """The steps of the complete checkpoints a run kept, as its trainer reported them (oldest first)."""
    raw = outputs.get("checkpoints")
    items = raw if isinstance(raw, list) else str(raw or "").split(",")
    steps = {_step_of(item) for item in items}
    latest = _int(outputs.get("checkpoint_latest_step"))
    if latest is not None:
        steps.add(latest)
    return sorted(step for step in steps if step is not None)


def choose_checkpoint(parent: Run, outputs: Mapping[str, Any], wanted: str) -> int:
    """The step to resume from (`latest` or `step-N`); RunError when the run kept no such complete checkpoint."""
    kept = checkpoint_steps(outputs)
    if not kept:
        again = "".join(f" {k}={v}" for k, v in sorted(parent.overrides.items()))
        raise RunError(
            f"`{escape(parent.name)}` saved no complete checkpoint, so there is nothing to resume from "
            f"(it {escape(parent.status)} at step {parent.last_step or 0}). "
            f"Start it again: `/finetune run recipe={escape(parent.recipe_name)}{escape(again)}`."
        )
    if wanted == "latest":
        return kept[-1]
    step = int(wanted.removeprefix("step-"))
    if step not in kept:
        listed = ", ".join(f"step-{s}" for s in kept)
        raise RunError(f"`{escape(parent.name)}` kept no complete checkpoint at step {step}; it has {listed}")
    return step


def _step_of(item: Any) -> int | None:
    if isinstance(item, int) and not isinstance(item, bool):
        return item
    text = str(item).strip().removeprefix("checkpoint-")
    return int(text) if text.isdigit() else None


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


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
