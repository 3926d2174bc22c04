"""The sweep's one card in the channel (edited in place), and its final summary. Pure rendering."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from bot.runs.card import STATUS_EMOJI, short_pin
from bot.runs.kinds import RunKind, Verb, applies
from bot.slack.blocks import ButtonAction, command_button, context, escape, header, mention, section
from bot.sweeps.board import ENDED, Counts, TrialRow, best, count, format_value, ranked, values_text
from storage.models import Run, Sweep

COMPARE_TOP = 3


def space_text(sweep: Sweep) -> str:
    """`grid over lr ∈ {0.01, 0.05, 0.1}` / `random over lr ~ loguniform(…) × hidden ∈ {8, 16}, seed 7`."""
    axes = " × ".join(_axis_text(axis) for axis in sweep.space)
    seed = f", sampler seed {sweep.seed}" if sweep.mode == "random" and sweep.seed is not None else ""
    return f"{sweep.mode} over {axes}{seed}"


def stop_rules(sweep: Sweep) -> str:
    """When the sweep stops itself."""
    rules = []
    if sweep.target is not None:
        sign = "≥" if sweep.higher_is_better else "≤"
        rules.append(f"when a trial reaches {sweep.metric} {sign} {sweep.target:g}")
    if sweep.failure_cutoff > 0:
        rules.append(f"after {sweep.failure_cutoff} failed trials in a row")
    return "Stops itself " + " or ".join(rules) if rules else ""


def render_sweep_card(
    run: Run, sweep: Sweep, rows: Sequence[TrialRow], *, polyaxon_url: str | None
) -> tuple[str, list[dict[str, Any]]]:
    """The sweep card: mode, space, trials done/running/failed/queued, best so far, Stop sweep / Compare top 3."""
    counts = count(rows, sweep.trials)
    top = best(rows)
    emoji = STATUS_EMOJI.get(run.status, ":grey_question:")
    presets = ", ".join(f"`{escape(p)}`" for p in run.presets) or "none"
    lines = [
        f"{emoji} *{escape(run.status)}* · {counts.describe()}",
        f"*Requested by* {mention(run.requester)} · *Presets* {presets} · *Concurrency* {sweep.concurrency}",
        f"*Space* {escape(space_text(sweep))} · {sweep.trials} trials",
    ]
    if run.overrides:
        fixed = " ".join(f"`{escape(k)}={escape(format_value(v))}`" for k, v in sorted(run.overrides.items()))
        lines.append(f"*Fixed* {fixed}")
    lines.append(_best_line(sweep, top, counts))
    rules = stop_rules(sweep)
    if rules:
        lines.append(f"_{escape(rules)}_")
    if sweep.stop_reason:
        lines.append(f":octagonal_sign: {sweep.stop_reason}")
    if not run.comparable:
        lines.append(":warning: *non-comparable*: not fully pinned (exploration)")
    blocks: list[dict[str, Any]] = [header(f"sweep · {run.recipe_name} · {run.name}"), section("\n".join(lines))]
    ctx = [f"matrix `{escape(run.polyaxon_uuid[:8])}`" if run.polyaxon_uuid else "not submitted yet"]
    if polyaxon_url:
        ctx.append(f"<{polyaxon_url}|open in Polyaxon>")
    pins = " · ".join(
        f"{k} `{escape(short_pin(str(v)))}`" for k, v in sorted(run.pins.items()) if k in {"model", "dataset", "code"}
    )
    if pins:
        ctx.append(f"pins: {pins}")
    ctx.append("the leaderboard is in the thread")
    blocks.append(context(*ctx))
    buttons = []
    # The buttons are the sweep's own commands, as the kinds table gives them.
    if run.status not in ENDED and applies(RunKind.SWEEP, Verb.STOP):
        buttons.append(command_button("Stop sweep", ButtonAction.STOP, run.name, suffix="stop", style="danger"))
    if len(ranked(rows)) >= 2 and applies(RunKind.SWEEP, Verb.COMPARE):
        buttons.append(
            command_button(f"Compare top {COMPARE_TOP}", ButtonAction.COMPARE_TOP, run.name, suffix="compare")
        )
    if buttons:
        blocks.append({"type": "actions", "elements": buttons})
    text = escape(f"sweep {run.recipe_name} {run.name}: {run.status}, {counts.describe()}")
    return text, blocks


def render_summary(run: Run, sweep: Sweep, rows: Sequence[TrialRow]) -> str:
    """The final summary posted in the thread once the sweep has ended (the requester is mentioned)."""
    counts = count(rows, sweep.trials)
    top = best(rows)
    lines = [f"{mention(run.requester)} the sweep *{escape(run.status)}*: {counts.describe()}."]
    if sweep.stop_reason:
        lines.append(f"It stopped early: {sweep.stop_reason}.")
    if top is not None:
        lines.append(
            f":trophy: Best: `{escape(top.name)}` {escape(values_text(top.values))} with {escape(sweep.metric)} "
            f"*{format_value(top.metric)}* (final evaluation on the sweep's eval contract)."
        )
        lines.append(
            f"Register it with `/finetune register {escape(top.name)} model=NAME`, compare the best with "
            f"`/finetune compare {escape(run.name)} top={COMPARE_TOP}`, or read its outputs back with "
            f"`/finetune outputs {escape(top.name)}`."
        )
    else:
        lines.append("No trial finished with a final evaluation, so nothing is ranked.")
    return "\n".join(lines)


def _best_line(sweep: Sweep, top: TrialRow | None, counts: Counts) -> str:
    if top is None:
        return f"*Best so far* none yet (ranked by {escape(sweep.metric)} once a trial finishes)"
    return (
        f"*Best so far* `{escape(top.name)}` {escape(values_text(top.values))} · {escape(sweep.metric)} "
        f"*{format_value(top.metric)}* (of {counts.succeeded} finished)"
    )


def _axis_text(axis: dict[str, Any]) -> str:
    key = str(axis["key"])
    if axis["kind"] == "choice":
        return f"{key} ∈ {{{', '.join(format_value(v) for v in axis.get('values') or [])}}}"
    return f"{key} ~ {axis['kind']}({float(axis['low']):g}, {float(axis['high']):g})"
