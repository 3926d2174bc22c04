"""Which presets a run fits in: the resources presets under which its memory estimate stays within budget."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from bot.catalog.manifests import Component, Preset, Recipe
from bot.catalog.memory import estimate_run_memory
from bot.catalog.resources import summarize_resources

if TYPE_CHECKING:
    from bot.catalog.plan import Plan


def presets_that_fit(
    recipe: Recipe, component: Component, plan: Plan, presets: Iterable[Preset], repo_root: Path
) -> list[str]:
    """Resources presets for this run kind under which the same run (same params) fits, in catalog order."""
    fitting = []
    for preset in presets:
        if preset.family != "resources" or preset.target_kind not in (None, component.run_kind):
            continue
        # A resources preset alone decides the budget (placement and storage presets do not change it).
        operation = {
            "runPatch": preset.document.get("runPatch") or {},
            "queue": preset.document.get("queue"),
            "component": plan.operation.get("component") or {},
        }
        resources = summarize_resources(operation, component.run_kind, [preset])
        estimate = estimate_run_memory(recipe, component, plan.params, resources, repo_root)
        if estimate is not None and estimate.fits:
            fitting.append(preset.name)
    return fitting
