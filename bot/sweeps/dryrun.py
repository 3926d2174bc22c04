"""What `sweep … --dry-run` shows, and why a sweep waits for a confirmed run first. Pure rendering."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bot.explain import render_plan
from bot.slack.blocks import context, escape, section
from storage.repos.runs import TERMINAL_STATUSES

if TYPE_CHECKING:
    from bot.catalog import Plan, SweepPlan
    from storage.models import Run


def render_sweep_plan(
    sweep_plan: SweepPlan, *, refusal: str | None, estimate: str | None = None
) -> list[dict[str, Any]]:
    """The fixed part as `run --dry-run` shows it (the estimate for every trial), then the space, the trials and
    the matrix Polyaxon gets."""
    plan = sweep_plan.plan
    blocks = render_plan(plan, notes=sweep_plan.notes, estimate=estimate)
    axes = "\n".join(f"• {escape(swept.describe())}  (sets `{escape(swept.input)}`)" for swept in sweep_plan.space)
    seed = f" · sampler seed {sweep_plan.seed}" if sweep_plan.seed is not None else ""
    direction = "higher is better" if sweep_plan.higher else "lower is better"
    lines = [
        f"*Sweep* {sweep_plan.mode} · {sweep_plan.trials} trials · concurrency {sweep_plan.concurrency}{seed}",
        axes,
        f"*Ranked by* `{escape(sweep_plan.metric)}` ({direction}), the eval contract's final evaluation",
    ]
    if sweep_plan.target is not None:
        lines.append(f"*Stops early* when a trial reaches {sweep_plan.target:g} (Polyaxon's metric early stopping)")
    matrix = json.dumps(sweep_plan.matrix, sort_keys=True)
    extra = [section("\n".join(lines)), section(f"*Polyaxon matrix*\n```{escape(matrix[:2800])}```")]
    if refusal is not None:
        extra.append(section(f":no_entry: *It would be refused now*: {refusal}"))
    else:
        extra.append(context("It would be submitted now: one Polyaxon matrix operation, whose trials Polyaxon runs."))
    return [blocks[0], *extra, *blocks[1:]][:50]


def smoke_first_refusal(plan: Plan, candidates: Sequence[Run]) -> str:
    """Why a sweep waits (mrkdwn): no confirmed run of these pins yet; the `run` and `outputs` commands to do first."""
    first = f"`/finetune run recipe={plan.recipe}" + (f" preset={','.join(plan.presets)}`" if plan.presets else "`")
    succeeded = [r for r in candidates if r.status == "succeeded"]
    going = [r for r in candidates if r.status not in TERMINAL_STATUSES]
    lines = [
        f"a sweep of `{plan.recipe}` waits for one confirmed run with the same pins (model, data, code, image): "
        "confirm one complete run, outputs included, before scaling out."
    ]
    if succeeded:
        lines.append(
            f"`{succeeded[0].name}` succeeded with these pins: confirm it with "
            f"`/finetune outputs {succeeded[0].name}`, then sweep again."
        )
    elif going:
        lines.append(
            f"`{going[0].name}` ({going[0].status}) has these pins: once it succeeds, "
            f"`/finetune outputs {going[0].name}` confirms it."
        )
    else:
        lines.append(f"Start one with {first}, then `/finetune outputs RUN` once it has succeeded.")
    return escape(" ".join(lines))  # mrkdwn: the names in it are the catalog's and the runs'; none is markup
