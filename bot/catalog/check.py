"""`finetune-bot manifests check`: every recipe x preset pair (and distributed recipes' preflights and recipes'
serving checks) through the plan and Polyaxon's checker, and every local dataset row by row.

What it finds is said once: a dataset's bad rows under the dataset (file and line), a problem every preset of a
recipe meets on one line that lists the presets. Nothing it meets ends in a traceback: an unexpected error is said
with the pair it met it on.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from bot.catalog.catalog import Catalog
from bot.catalog.datasets import data_refusal
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
    except (OSError, UnicodeError, ValueError) as exc:  # a file that cannot be read at all
        return [f"(catalog): could not be read: {type(exc).__name__}: {exc}"]
    problems = _data_problems(catalog)
    found: dict[tuple[str, str], list[str]] = {}  # (recipe, message) -> the presets it was met with
    for recipe in catalog.recipes.values():
        refused = data_refusal(recipe.name, catalog.data_uses(recipe))
        if refused is not None:
            # Said once for the recipe, not once per preset: its data refuses every run. Rows already named above
            # under their dataset are not named again.
            own = [line[2:] for line in refused.splitlines() if line.startswith("• ") and line[2:] not in problems]
            listed = "".join(f"\n  {line}" for line in own)
            problems.append(f"{recipe.name}: cannot run on its data; every preset refuses it{listed}")
            continue
        kind = catalog.components[recipe.spec.component].run_kind
        combos: list[list[str]] = [list(recipe.spec.presets)] + [[name] for name in catalog.presets]
        for names in combos:
            label = ",".join(names) or "(no preset)"
            incompatible = any(catalog.presets[n].target_kind not in (None, kind) for n in names)
            command = RunCommand(recipe=recipe.name, presets=names)
            message = _attempt(catalog.plan, command, require_local=False)
            if message is not None:
                if not incompatible:
                    found.setdefault((recipe.name, message), []).append(label)
                continue
            if incompatible:
                found.setdefault((recipe.name, "a preset for another run kind was accepted"), []).append(label)
            elif kind == "pytorchjob":
                # A distributed recipe's preflight must compile with every preset its run accepts.
                preflight = _attempt(catalog.plan_preflight, command, require_local=False)
                if preflight is not None:
                    found.setdefault((recipe.name, f"(preflight) {preflight}"), []).append(label)
        if recipe.spec.serving is not None:
            # The serving check must compile, its prompt set match its pin (a real path stands in for the
            # checkpoint a registered version would give it).
            serving = _attempt(catalog.plan_serving_check, recipe.name, checkpoint="outputs/model", model_run="0" * 32)
            if serving is not None:
                problems.append(f"{recipe.name} (serving check): {serving}")
    for (recipe_name, message), labels in found.items():
        problems.append(f"{recipe_name} x {', '.join(labels)}: {message}")
    return problems


def _data_problems(catalog: Catalog) -> list[str]:
    """Each local dataset's bad rows and missing files, once per dataset."""
    problems: list[str] = []
    for entry in [*catalog.datasets.values(), *catalog.recipe_data.values()]:
        problems += list(entry.problems)
    return problems


def _attempt(plan: Callable[..., object], *args: Any, **kwargs: Any) -> str | None:
    """None when the plan compiles; else what refused it, never a traceback (an unexpected error named as such)."""
    try:
        plan(*args, **kwargs)
    except PlanError as exc:
        return exc.message
    except CatalogError as exc:
        return str(exc)
    except Exception as exc:  # the check must say what it met, on the pair it met it, and go on with the rest
        return f"unexpected error: {type(exc).__name__}: {exc}"
    return None
