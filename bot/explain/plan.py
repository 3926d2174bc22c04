"""The dry-run reply: a compiled plan with its pins, params and where each came from, resources and warnings."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.catalog import Plan
from bot.catalog.manifests import PINNED_INPUTS
from bot.catalog.policy import NOTIFY_REQUESTER
from bot.grammar import NOTIFY_CHOICES, Notify
from bot.slack.blocks import cap_blocks, clip, context, escape, header, human_duration, section, sections

MAX_VALUE_SHOWN = 120


def _value(value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        first = value.splitlines()[0] if value else ""
        text = repr(first) if value == first else f"{first!r} … ({len(value.splitlines())} lines)"
    else:
        text = str(value)
    return escape(clip(text, MAX_VALUE_SHOWN))


def _short(digest: str) -> str:
    """`sha256:abcdef123456…` for a digest, the text itself otherwise."""
    if digest.startswith("sha256:") and len(digest) > 19:
        return digest[:19] + "…"
    if "@sha256:" in digest:
        name, _, hexpart = digest.partition("@sha256:")
        return f"{name}@sha256:{hexpart[:12]}…"
    return digest


def _resource_lines(resources: dict[str, Any], provenance: dict[str, str]) -> list[str]:
    """What the presets ask of the cluster, each line with the preset(s) that set it."""

    def by(*fields: str) -> str:
        origins = [provenance[f] for f in fields if f in provenance]
        return f"  ← _{escape(', '.join(dict.fromkeys(origins)))}_" if origins else ""

    replicas = ("runPatch.master.container.resources", "runPatch.worker.container.resources")
    lines = [
        f"• run kind `{escape(str(resources.get('run_kind')))}`, replicas {escape(str(resources.get('replicas')))}"
    ]
    gpus_total = resources.get("gpus_total") or 0
    gpu_line = f"• GPUs: {gpus_total}" if gpus_total else "• GPUs: none (CPU)"
    if gpus_total and resources.get("gpus_per_replica") != gpus_total:
        gpu_line += f" ({escape(str(resources.get('gpus_per_replica')))} per replica)"
    if resources.get("gpu_memory_gib"):
        gpu_line += f", {escape(str(resources['gpu_memory_gib']))} GiB each"
    lines.append(gpu_line + by("runPatch.container.resources", *replicas))
    for key in ("requests", "limits"):
        if resources.get(key):
            pairs = ", ".join(f"{k}={v}" for k, v in resources[key].items())
            lines.append(f"• {key}: {escape(pairs)}" + by("runPatch.container.resources", *replicas))
    if resources.get("node_selector"):
        pairs = ", ".join(f"{k}={v}" for k, v in resources["node_selector"].items())
        lines.append(
            f"• node selector: {escape(pairs)}"
            + by("runPatch.environment.nodeSelector", "runPatch.master.environment.nodeSelector")
        )
    if resources.get("tolerations"):
        names = ", ".join(str(t.get("key")) for t in resources["tolerations"])
        lines.append(
            f"• tolerations: {escape(names)}"
            + by("runPatch.environment.tolerations", "runPatch.master.environment.tolerations")
        )
    if resources.get("queue"):
        lines.append(f"• queue: `{escape(str(resources['queue']))}`" + by("queue"))
    if resources.get("max_retries"):
        lines.append(
            f"• retries on failure/preemption: {escape(str(resources['max_retries']))}" + by("termination.maxRetries")
        )
    return lines


def _presets_line(plan: Plan) -> str:
    """Each preset with where it came from (the recipe's default or the command line)."""
    shown = []
    for name in plan.presets:
        source = plan.preset_sources.get(name)
        shown.append(f"`{escape(name)}` ({escape(str(source))})" if source else f"`{escape(name)}`")
    return ", ".join(shown) or "none"


def _memory_lines(plan: Plan) -> str:
    """The preflight estimate, and what happens to a run over it."""
    assert plan.memory is not None
    text = f"*Preflight memory*: {escape(plan.memory.summary())}"
    if plan.over_memory_budget:
        fits = ", ".join(f"`preset={escape(name)}`" for name in plan.fitting_presets) or "no shipped preset"
        text += (
            f"\n:no_entry: A run would be *refused*: it fits on {fits}; or train lighter (use_peft=true, a smaller "
            "batch_size or max_length). An approver may submit it anyway with `--force` (audited)."
        )
    return text


def _gate_text(plan: Plan) -> str:
    """The smoke-first gate's verdict on a distributed plan, with its evidence or the preflight to run first."""
    validation = plan.validation or {}
    state = validation.get("state")
    head = f"*Distributed plan*: {plan.expected_world_size} ranks · "
    if state == "validated":
        lines = [
            head + f":shield: *validated* by preflight `{escape(str(validation.get('preflight')))}` "
            f"(passed {escape(str(validation.get('passed_at') or ''))})"
        ]
        lines += [f"• {escape(line)}" for line in validation.get("lines") or []]
        return "\n".join(lines)
    if state == "awaiting_approval":
        return head + (
            ":raised_hand: *not validated*: with `--skip-preflight` the run would be held until other approvers "
            "approve skipping its preflight (quorum, by reaction, audited), then run *unvalidated*"
        )
    command = validation.get("command")
    text = head + ":no_entry: *not validated*: `run` is refused until a preflight of these pins and presets passes."
    if command:
        text += f"\nRun first: `{escape(str(command))}`"
    return text


def render_plan(plan: Plan, *, notes: Sequence[str] = (), estimate: str | None = None) -> list[dict[str, Any]]:
    """The dry-run reply: recipe, pins, params with provenance, resources, eval contract, memory, warnings.

    `notes` are the command's own (`RunCommand.notes`, e.g. names read lower-case), shown once under the title.
    """
    title = f"{'Dry run' if plan.dry_run else 'Plan'}: {plan.recipe}"
    status = "comparable" if plan.comparable else ":warning: *non-comparable* (exploration)"
    presets = _presets_line(plan)
    blocks: list[dict[str, Any]] = [
        header(title),
        section(
            f"*Recipe* `{escape(plan.recipe)}` ({escape(plan.recipe_file)}, `{_short(plan.recipe_hash)}`)\n"
            f"*Component* `{escape(str(plan.component))}` · *Presets* {presets} · {status}"
        ),
    ]
    if notes:
        blocks.append(context(*(escape(note) for note in notes)))
    pin_lines = [f"• {escape(name)}: `{escape(_short(value))}`" for name, value in plan.pins.items()]
    pin_lines += [f"• :warning: unpinned: {escape(reason)}" for reason in plan.unpinned]
    blocks += sections("*Pins*", pin_lines)

    chosen, defaults = [], []
    for name, value in plan.params.items():
        origin = plan.provenance.get(name, "?")
        if origin == "component default":
            # A pinned input the recipe did not set (a local model has no revision) is no pin: the pins say what is.
            if name not in PINNED_INPUTS:
                defaults.append(f"{escape(name)}={_value(value)}")
        else:
            chosen.append(f"• `{escape(name)}` = {_value(value)}  ← _{escape(origin)}_")
    blocks += sections("*Params* (effective value ← where it came from)", chosen)
    if defaults:
        blocks += sections("*Component defaults*", [", ".join(defaults)])

    resource_lines = _resource_lines(plan.resources, plan.provenance)
    cluster = [
        f"• `{escape(field)}` ← _{escape(origin)}_"
        for field, origin in plan.provenance.items()
        if "." in field or field in ("queue", "termination")
    ]
    blocks += sections("*Resources* (from presets; each line says which preset set it)", resource_lines + cluster)

    if plan.eval_contract_hash:
        fields = ", ".join(f"{escape(k)}={_value(v)}" for k, v in plan.eval_contract.items())
        blocks += sections("*Eval contract*", [f"hash `{escape(plan.eval_contract_hash)}`", fields])
    else:
        blocks.append(section("*Eval contract*: none (this recipe defines no fixed evaluation)"))
    if plan.memory is not None:
        blocks.append(section(_memory_lines(plan)))
    blocks.append(section(_cost_text(plan, estimate)))
    if plan.distributed:
        blocks.append(section(_gate_text(plan)))
    blocks.append(section(failure_policy_text(plan.policy)))
    warning_lines = [f"• :warning: {escape(w)}" for w in plan.warnings] or ["none"]
    blocks += sections("*Warnings*", warning_lines)
    if plan.dry_run:
        blocks.append(
            context("Nothing was submitted (`--dry-run`). Run the same command without `--dry-run` to start it.")
        )
    return cap_blocks(blocks, "…plan truncated to fit Slack's 50-block limit.")


def _cost_text(plan: Plan, estimate: str | None) -> str:
    """What it holds while running, the price where set, and the estimate (the usage service's, when there is one)."""
    cost = plan.cost
    if cost is None:
        return "*Accelerator-hours*: unknown (no cost profile)"
    held = f"{cost.count:g} {escape(cost.unit)}{'s' if cost.count != 1 else ''} while running"
    price = (
        f" · {cost.price:g} {escape(str(cost.currency))} per {escape(cost.unit)}-hour "
        f"({escape(str(cost.price_source))})"
        if cost.price is not None
        else " · no price set"
    )
    line = f"*Accelerator-hours* {held}{price}"
    if estimate:
        return f"{line}\n• estimate {escape(estimate)}"
    if cost.max_duration_s is not None:
        bound = human_duration(cost.max_duration_s) + f" ({escape(str(cost.max_duration_source))})"
        return f"{line}\n• at most {bound}"
    return line


def failure_policy_text(policy: dict[str, Any]) -> str:
    """What the bot does when the run goes wrong: retries, the start deadline, where final failures are told."""
    retry = policy.get("retry")
    lines = ["*When it goes wrong*"]
    if retry:
        lines.append(
            f"• retried up to {retry['max']} more time(s) from its newest complete checkpoint when "
            f"{escape(', '.join(map(str, retry['on'])))}; never on a code, data or NaN failure"
        )
    else:
        lines.append("• not retried automatically (the recipe sets no `retry:`); resume it by hand")
    if policy.get("max_pending_s"):
        lines.append(
            f"• stopped if it has not started {human_duration(float(policy['max_pending_s']))} after submission "
            f"(from the {escape(str(policy.get('max_pending_from', 'recipe')))})"
        )
    if policy.get("notify"):
        lines.append(f"• a final failure is also told in <#{escape(str(policy['notify']))}>")
    chosen = policy.get(NOTIFY_REQUESTER)
    if chosen in NOTIFY_CHOICES:
        lines.append(f"• you hear that it ended or needs you by {notify_text(chosen)} (`notify={chosen}`)")
    else:
        lines.append(
            "• you hear that it ended or needs you as your App Home default says (else a mention in its thread); "
            "`notify=dm` or `notify=both` chooses a direct message for this run"
        )
    return "\n".join(lines)


def notify_text(mode: Notify) -> str:
    """How a requester hears of a run, in a sentence's middle (`by a direct message …`)."""
    return {
        "thread": "a mention in its thread",
        "dm": "a direct message (no mention in its thread)",
        "both": "a mention in its thread and a direct message",
    }[mode]
