"""`finetune-bot manifests check`: every recipe x preset pair (and distributed recipes' preflights and recipes'
serving checks) through the plan and Polyaxon's checker."""

from __future__ import annotations

from pathlib import Path

from bot.catalog.catalog import Catalog
from bot.catalog.errors import CatalogError, PlanError
from bot.grammar import RunCommand


def check_catalog(catalog_dir: Path) -> list[str]:
    """Compile every recipe x preset pair (and each recipe's default presets) with Polyaxon's checker.

    Returns the problems (empty = all good). A local model/dataset that is not built does not count
    as a problem. Pairs of a preset and a component of another run kind must be refused by the
    plan (with a clear error); that they are is checked too.
    """
    try:
        catalog = Catalog.load(Path(catalog_dir))
    except CatalogError as exc:
        return [str(exc)]
    problems: list[str] = []
    for recipe in catalog.recipes.values():
        kind = catalog.components[recipe.spec.component].run_kind
        combos: list[list[str]] = [list(recipe.spec.presets)] + [[name] for name in catalog.presets]
        for names in combos:
            label = f"{recipe.name} x {','.join(names) or '(no preset)'}"
            incompatible = any(catalog.presets[n].target_kind not in (None, kind) for n in names)
            command = RunCommand(recipe=recipe.name, presets=names)
            try:
                catalog.plan(command, require_local=False)
            except PlanError as exc:
                if not incompatible:
                    problems.append(f"{label}: {exc.message}")
                continue
            if incompatible:
                problems.append(f"{label}: a preset for another run kind was accepted")
            elif kind == "pytorchjob":
                # A distributed recipe's preflight must compile with every preset its run accepts.
                try:
                    catalog.plan_preflight(command, require_local=False)
                except PlanError as exc:
                    problems.append(f"{label} (preflight): {exc.message}")
        if recipe.spec.serving is not None:
            # The serving check must compile, its prompt set match its pin (a real path stands in for the
            # checkpoint a registered version would give it).
            try:
                catalog.plan_serving_check(recipe.name, checkpoint="outputs/model", model_run="0" * 32)
            except PlanError as exc:
                problems.append(f"{recipe.name} (serving check): {exc.message}")
    return problems
