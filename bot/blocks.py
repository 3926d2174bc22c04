"""Block Kit rendering: pure functions that return lists of block dicts within Slack's limits.

Limits kept here: at most 50 blocks per message, 3000 characters per section text, 150 per
header, 10 elements per context block. Long lists are split over several sections.
"""

from __future__ import annotations

from typing import Any

from bot.catalog import Catalog, Plan
from bot.grammar import CommandError

MAX_BLOCKS = 50
MAX_SECTION = 3000
MAX_HEADER = 150
MAX_CONTEXT_ELEMENTS = 10
MAX_CONTEXT_TEXT = 2000
MAX_VALUE_SHOWN = 120

THREAD_NOTE = (
    "Slash commands are not available inside Slack threads: use the buttons on a run's status card "
    "(logs, stop, resume, compare, register) for actions in its thread."
)

USAGE: dict[str, str] = {
    "run": "/finetune run recipe=NAME [preset=P[,P2…]] [KEY=VALUE …] [--dry-run]",
    "status": "/finetune status [RUN]",
    "logs": "/finetune logs RUN [lines=N]",
    "compare": "/finetune compare RUN RUN… [metric=NAME] [--exploratory]",
    "stop": "/finetune stop RUN",
    "resume": "/finetune resume RUN [checkpoint=latest|step-N]",
    "register": "/finetune register RUN model=NAME [version=V]",
    "recipes": "/finetune recipes",
    "presets": "/finetune presets",
    "digest": "/finetune digest (daily HH:MM | weekly DAY HH:MM | off | now) [TZ]",
    "trace": "/finetune trace MODEL[:VERSION]",
    "help": "/finetune help [SUBCOMMAND]",
}

HELP: dict[str, str] = {
    "run": (
        "Start a training run from a recipe. The recipe fixes the model, data, code and image (pinned) "
        "and says which training keys you may override, with their types and bounds; presets choose "
        "the cluster settings (resources, placement, queue) and stack in order, e.g. `preset=gpu-1x,spot`. "
        "Cluster keys such as `gpus=` or `nodeSelector=` are refused as overrides: pick a preset. "
        "`--dry-run` shows the compiled plan (pins, params and where each came from, resources, eval "
        "contract hash, memory estimate, warnings) without submitting anything. Values with spaces go "
        "in quotes.\nExample: `/finetune run recipe=sft-tiny lr=3e-3 preset=cpu-small --dry-run`"
    ),
    "status": (
        "Show a run's status card, or without RUN the active runs of this channel. RUN is a run uuid, "
        "its first 8 characters, or a run name."
    ),
    "logs": "Post the last N log lines of a run (default 50, at most 1000) in its thread, secrets redacted.",
    "compare": (
        "Compare two or more runs on one metric (default: the eval contract's first metric): a table and a "
        "plot in the thread. Runs must share one eval contract; runs labelled non-comparable (exploration) "
        "are refused unless you add `--exploratory`."
    ),
    "stop": "Stop a running run; it keeps its metrics and last checkpoint.",
    "resume": "Continue a stopped or failed run from its latest checkpoint, or from `checkpoint=step-N`.",
    "register": (
        "Ask to register a run's model as a version in the registry. The bot posts an approval request "
        "with the criteria and their evidence; approvers react with the approval emoji on that message "
        "(not the requester); a quorum registers the version."
    ),
    "recipes": "List the recipes: what each trains, its component, default presets and overridable keys.",
    "presets": "List the presets: the cluster settings each adds. Presets stack in the order you give them.",
    "digest": (
        "Schedule this channel's digest of finished, failed, stuck and awaiting-decision runs: "
        "`daily 09:00`, `weekly mon 09:00`, optionally with a time zone (`Europe/Berlin`, default UTC); "
        "`off` stops it, `now` posts one immediately."
    ),
    "trace": "Trace a registered model version back to its run, recipe, pins, data and eval results.",
    "help": "Show help for every subcommand, or for one: `/finetune help run`.",
}


def escape(text: str) -> str:
    """Escape the three characters Slack mrkdwn treats as control characters."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def header(text: str) -> dict[str, Any]:
    """A header block (plain text, clipped to 150 characters)."""
    return {"type": "header", "text": {"type": "plain_text", "text": _clip(text, MAX_HEADER), "emoji": True}}


def section(text: str) -> dict[str, Any]:
    """A mrkdwn section block (clipped to 3000 characters)."""
    return {"type": "section", "text": {"type": "mrkdwn", "text": _clip(text, MAX_SECTION)}}


def context(*texts: str) -> dict[str, Any]:
    """A context block of mrkdwn elements (at most 10, each clipped)."""
    elements = [{"type": "mrkdwn", "text": _clip(t, MAX_CONTEXT_TEXT)} for t in texts[:MAX_CONTEXT_ELEMENTS]]
    return {"type": "context", "elements": elements}


def divider() -> dict[str, Any]:
    """A divider block."""
    return {"type": "divider"}


def sections(title: str, lines: list[str]) -> list[dict[str, Any]]:
    """`title` then `lines`, split over as many sections as the 3000-character limit needs."""
    blocks: list[dict[str, Any]] = []
    current = title
    for line in lines:
        line = _clip(line, MAX_SECTION - len(title) - 2)
        if len(current) + 1 + len(line) > MAX_SECTION:
            blocks.append(section(current))
            current = line
        else:
            current = f"{current}\n{line}" if current else line
    if current:
        blocks.append(section(current))
    return blocks


def _cap(blocks: list[dict[str, Any]], note: str) -> list[dict[str, Any]]:
    """Keep a message within 50 blocks, ending with a note when something was left out."""
    if len(blocks) <= MAX_BLOCKS:
        return blocks
    return [*blocks[: MAX_BLOCKS - 1], context(note)]


def _value(value: Any) -> str:
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif isinstance(value, str):
        first = value.splitlines()[0] if value else ""
        text = repr(first) if value == first else f"{first!r} … ({len(value.splitlines())} lines)"
    else:
        text = str(value)
    return escape(_clip(text, MAX_VALUE_SHOWN))


def _short(digest: str) -> str:
    """`sha256:abcdef123456…` for a digest, the text itself otherwise."""
    if digest.startswith("sha256:") and len(digest) > 19:
        return digest[:19] + "…"
    if "@sha256:" in digest:
        name, _, hexpart = digest.partition("@sha256:")
        return f"{name}@sha256:{hexpart[:12]}…"
    return digest


def _resource_lines(resources: dict[str, Any]) -> list[str]:
    lines = [f"• run kind `{resources.get('run_kind')}`, replicas {resources.get('replicas')}"]
    gpus_total = resources.get("gpus_total") or 0
    gpu_line = f"• GPUs: {gpus_total}" if gpus_total else "• GPUs: none (CPU)"
    if gpus_total and resources.get("gpus_per_replica") != gpus_total:
        gpu_line += f" ({resources.get('gpus_per_replica')} per replica)"
    if resources.get("gpu_memory_gib"):
        gpu_line += f", {resources['gpu_memory_gib']} GiB each"
    lines.append(gpu_line)
    for key in ("requests", "limits"):
        if resources.get(key):
            pairs = ", ".join(f"{k}={v}" for k, v in resources[key].items())
            lines.append(f"• {key}: {escape(pairs)}")
    if resources.get("node_selector"):
        pairs = ", ".join(f"{k}={v}" for k, v in resources["node_selector"].items())
        lines.append(f"• node selector: {escape(pairs)}")
    if resources.get("tolerations"):
        names = ", ".join(str(t.get("key")) for t in resources["tolerations"])
        lines.append(f"• tolerations: {escape(names)}")
    if resources.get("queue"):
        lines.append(f"• queue: `{escape(str(resources['queue']))}`")
    if resources.get("max_retries"):
        lines.append(f"• retries on failure/preemption: {resources['max_retries']}")
    return lines


def render_plan(plan: Plan) -> list[dict[str, Any]]:
    """The dry-run reply: recipe, pins, params with provenance, resources, eval contract, memory, warnings."""
    title = f"{'Dry run' if plan.dry_run else 'Plan'}: {plan.recipe}"
    status = "comparable" if plan.comparable else ":warning: *non-comparable* (exploration)"
    presets = ", ".join(f"`{p}`" for p in plan.presets) or "none"
    blocks: list[dict[str, Any]] = [
        header(title),
        section(
            f"*Recipe* `{plan.recipe}` ({escape(plan.recipe_file)}, `{_short(plan.recipe_hash)}`)\n"
            f"*Component* `{plan.component}` · *Presets* {presets} · {status}"
        ),
    ]
    pin_lines = [f"• {name}: `{escape(_short(value))}`" for name, value in plan.pins.items()]
    pin_lines += [f"• :warning: unpinned: {escape(reason)}" for reason in plan.unpinned]
    blocks += sections("*Pins*", pin_lines)

    chosen, defaults = [], []
    for name, value in plan.params.items():
        origin = plan.provenance.get(name, "?")
        if origin == "component default":
            defaults.append(f"{name}={_value(value)}")
        else:
            chosen.append(f"• `{name}` = {_value(value)}  ← _{escape(origin)}_")
    blocks += sections("*Params* (effective value ← where it came from)", chosen)
    if defaults:
        blocks += sections("*Component defaults*", [", ".join(defaults)])

    resource_lines = _resource_lines(plan.resources)
    cluster = [
        f"• `{escape(field)}` ← _{escape(origin)}_"
        for field, origin in plan.provenance.items()
        if "." in field or field in ("queue", "termination")
    ]
    blocks += sections("*Resources* (from presets)", resource_lines + cluster)

    if plan.eval_contract_hash:
        fields = ", ".join(f"{k}={_value(v)}" for k, v in plan.eval_contract.items())
        blocks += sections("*Eval contract*", [f"hash `{plan.eval_contract_hash}`", fields])
    else:
        blocks.append(section("*Eval contract*: none (this recipe defines no fixed evaluation)"))
    if plan.memory is not None:
        blocks.append(section(f"*Preflight memory*: {escape(plan.memory.summary())}"))
    warning_lines = [f"• :warning: {escape(w)}" for w in plan.warnings] or ["none"]
    blocks += sections("*Warnings*", warning_lines)
    if plan.dry_run:
        blocks.append(
            context("Nothing was submitted (`--dry-run`). Run the same command without `--dry-run` to start it.")
        )
    return _cap(blocks, "…plan truncated to fit Slack's 50-block limit.")


def render_recipes(catalog: Catalog) -> list[dict[str, Any]]:
    """The `recipes` reply: one section per recipe."""
    blocks: list[dict[str, Any]] = [header("Recipes")]
    for recipe in catalog.recipes.values():
        spec = recipe.spec
        keys = ", ".join(f"`{k}` ({escape(o.describe())})" for k, o in recipe.overrides.items()) or "none"
        flags = " · :warning: exploration (non-comparable runs)" if spec.exploration else ""
        blocks.append(
            section(
                f"*{recipe.name}* — {escape(recipe.description)}\n"
                f"component `{spec.component}` · presets {', '.join(f'`{p}`' for p in spec.presets) or 'none'}{flags}\n"
                f"overridable: {keys}"
            )
        )
    blocks.append(context(f"Run one: `{USAGE['run']}`"))
    return _cap(blocks, "…more recipes than fit in one message; see manifests/recipes/.")


def render_presets(catalog: Catalog) -> list[dict[str, Any]]:
    """The `presets` reply: one line per preset, in stacking order notes."""
    lines = []
    for preset in catalog.presets.values():
        target = f" (for {preset.target_kind} components)" if preset.target_kind == "pytorchjob" else ""
        lines.append(f"• *{preset.name}* — {escape(preset.description)}{target}")
    blocks = [header("Presets"), *sections("", lines)]
    blocks.append(context("Presets stack in the order given: `preset=gpu-1x,spot` applies gpu-1x, then spot."))
    return _cap(blocks, "…more presets than fit in one message; see manifests/presets/.")


def render_help(topic: str | None) -> list[dict[str, Any]]:
    """Help for one subcommand, or for all of them; mentions that slash commands do not work in threads."""
    if topic in HELP:
        assert topic is not None
        return [
            header(f"/finetune {topic}"),
            section(f"`{USAGE[topic]}`\n{escape(HELP[topic])}"),
            context(THREAD_NOTE),
        ]
    lines = [f"• `{USAGE[name]}` — {escape(HELP[name].split('. ')[0].rstrip('.'))}." for name in USAGE]
    return [
        header("/finetune"),
        *sections("", lines),
        context("`/finetune help SUBCOMMAND` for details. " + THREAD_NOTE),
    ]


def render_command_error(err: CommandError) -> list[dict[str, Any]]:
    """A short reply for a user error: the message, the closest valid names, a pointer to help."""
    blocks: list[dict[str, Any]] = [section(f":x: {err.message if err.mrkdwn else escape(err.message)}")]
    hints = []
    if err.suggestions:
        hints.append("Did you mean " + ", ".join(f"`{escape(s)}`" for s in err.suggestions[:5]) + "?")
    hints.append("See `/finetune help`.")
    blocks.append(context(*hints))
    return blocks


# --- command buttons (handlers/actions.py) ------------------------------------------------------

# A button with this action id (or `finetune_command:<suffix>`, since ids are unique per message)
# carries a `/finetune` command string as its value; a click goes through the same parser as typing.
COMMAND_ACTION_ID = "finetune_command"


def command_button(label: str, command: str, *, suffix: str | None = None, style: str | None = None) -> dict[str, Any]:
    """A button that runs `/finetune <command>` for whoever clicks it (slash commands do not work in threads)."""
    button: dict[str, Any] = {
        "type": "button",
        "text": {"type": "plain_text", "text": _clip(label, 75)},
        "action_id": COMMAND_ACTION_ID if suffix is None else f"{COMMAND_ACTION_ID}:{suffix}",
        "value": command,
    }
    if style is not None:
        button["style"] = style
    return button
