"""`Catalog`: the loaded manifests, lookups by name, and `plan` (the compile step is `plan.py`)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

from bot.catalog.choices import ChainBase, dataset_entry, generation_problem, take_choices, with_dataset
from bot.catalog.cost import Pricing, cost_profile, load_pricing
from bot.catalog.datasets import DatasetEntry, RowCache, data_refusal
from bot.catalog.errors import PlanError
from bot.catalog.evalrun import compile_eval, default_suite
from bot.catalog.fit import presets_that_fit
from bot.catalog.harness import Suite, find_suite
from bot.catalog.loading import load_manifests
from bot.catalog.manifests import Component, DatasetRef, PreflightSpec, Preset, Recipe
from bot.catalog.pins import Pinner
from bot.catalog.plan import Plan, compile_plan
from bot.catalog.policy import NOTIFY_REQUESTER
from bot.catalog.preflight import compile_preflight, mark_distributed
from bot.catalog.presets import find_preset, presets_for_run
from bot.catalog.rewards import RewardFunction
from bot.catalog.serving import compile_serving_check
from bot.catalog.sweep import SweepPlan, plan_sweep
from bot.catalog.trainers import component_trainer
from bot.grammar import RunCommand, SweepCommand, closest, did_you_mean

T = TypeVar("T")


def on_snapshot(method: Callable[..., T]) -> Callable[..., T]:
    """Run a catalog method on the catalog as it is when the call starts: `Catalog.adopt` replaces the whole state
    at once (a new attribute dict, never changing the old one), so a plan that is being compiled while the
    catalog reloads reads one catalog from start to end."""

    @functools.wraps(method)
    def on_one(self: Catalog, *args: Any, **kwargs: Any) -> T:
        snapshot = object.__new__(Catalog)
        snapshot.__dict__ = self.__dict__
        return method(snapshot, *args, **kwargs)

    return on_one


class Catalog:
    """Recipes, presets and components loaded from a catalog folder."""

    def __init__(
        self,
        root: Path,
        components: dict[str, Component],
        presets: dict[str, Preset],
        recipes: dict[str, Recipe],
        pricing: Pricing | None = None,
        *,
        datasets: dict[str, DatasetEntry] | None = None,
        rewards: dict[str, RewardFunction] | None = None,
        suites: dict[str, Suite] | None = None,
        recipe_data: dict[str, DatasetEntry] | None = None,
    ) -> None:
        self.root = root
        self.repo_root = root.parent
        self.components = components
        self.presets = presets
        self.recipes = recipes
        self.datasets = datasets or {}
        # Recipes' local dataset folders that no catalog entry names, checked whole (by path).
        self.recipe_data = recipe_data or {}
        self.rewards = rewards or {}
        self.suites = suites or {}
        self.pricing = pricing or Pricing()
        # Which catalog this is (the git commit of its folder, `-dirty` when it differs; else a content digest) and
        # when it was loaded: set by whoever loads it (bot.reload), recorded with every run planned from it.
        self.revision: str | None = None
        self.loaded_at: datetime | None = None
        # The newest change of the folder that was refused (it did not load): when, and why. The catalog in force
        # is still this one.
        self.refused: tuple[datetime, str] | None = None
        # One per catalog: local content digests are cached across plans.
        self._pinner = Pinner(self.repo_root, self.suites)

    @classmethod
    def load(cls, catalog_dir: Path, *, rows: RowCache | None = None) -> Catalog:
        """Read and validate every manifest; raise `CatalogError` naming the file and field. Local datasets are
        checked row by row (`rows` keeps what was checked, for the next load); a recipe on bad data is refused when
        it is planned, and the rest of the catalog works."""
        root = Path(catalog_dir)
        found = load_manifests(root, rows)
        return cls(
            root,
            found.components,
            found.presets,
            found.recipes,
            load_pricing(root, found.presets),
            datasets=found.datasets,
            rewards=found.rewards,
            suites=found.suites,
            recipe_data=found.recipe_data,
        )

    def adopt(self, newer: Catalog) -> None:
        """Take `newer`'s whole state in one step: every holder of this catalog plans from the new one from now on,
        a plan being compiled finishes on the old one (`on_snapshot`)."""
        self.__dict__ = dict(newer.__dict__)

    # -- lookups --

    def recipe(self, name: str) -> Recipe:
        """The recipe called `name`, or a `PlanError` with the closest names."""
        if name in self.recipes:
            return self.recipes[name]
        suggestions = closest(name, list(self.recipes))
        raise PlanError(
            f"no recipe {name!r}{did_you_mean(suggestions)} (see /finetune recipes)", suggestions=suggestions
        )

    def preset(self, name: str) -> Preset:
        """The preset called `name`, or a `PlanError` with the closest names."""
        return find_preset(self.presets, name)

    # -- planning --

    @on_snapshot
    def plan(self, cmd: RunCommand, *, require_local: bool = True, base: ChainBase | None = None) -> Plan:
        """Compile a `run` command into a validated, pinned `Plan`, or raise `PlanError`.

        With `require_local=False` (used by `manifests check`) a missing local model or dataset
        does not fail the plan: its pin reads `unbuilt` and a warning says how to build it.
        """
        recipe = self.recipe(cmd.recipe)
        component = self.components[recipe.spec.component]
        chosen, overrides = take_choices(recipe, component, cmd.overrides, self.datasets, self.rewards)
        if overrides != cmd.overrides:
            cmd = cmd.model_copy(update={"overrides": overrides})
        if chosen.dataset is not None:
            recipe = with_dataset(recipe, chosen.dataset)
        uses = self.data_uses(recipe, chosen.dataset)
        refusal = data_refusal(recipe.name, uses)
        if refusal is not None:
            raise PlanError(refusal)
        derived: dict[str, tuple[Any, str]] = {}
        if (chosen.base is None) != (base is None):
            raise PlanError(
                f"base={chosen.base or ''}: only `/finetune run` starts from another run's model; a sweep, a preflight "
                "or the run form starts from the recipe's own"
            )
        if base is not None:
            derived.update(base.params())
        if chosen.rewards:
            origin = "command line" if "rewards" in chosen.given else f"recipe {recipe.file}"
            derived["reward_funcs"] = (",".join(chosen.rewards), origin)
        choice = presets_for_run(cmd.presets, recipe, component, self.presets)
        plan = compile_plan(
            cmd,
            recipe,
            component,
            choice,
            self._pinner,
            require_local=require_local,
            derived=derived,
            patches=[base.patch()] if base is not None else [],
        )
        if base is not None:
            if base.model_pin != plan.pins.get("model"):
                raise PlanError(
                    f"base={base.run_name} trained {base.model_pin or 'another model'}; recipe {recipe.name} starts "
                    f"from {plan.pins.get('model')}: a chain continues the same model"
                )
            plan.pins["base"] = f"{base.run_name}@{base.model_digest}"
        if chosen.dataset is not None:
            plan.provenance["dataset_name"] = f"command line: dataset={chosen.dataset.name}"
        if cmd.notify is not None:
            # How its requester hears of it, stored with the run beside the recipe's failure policy (bot.notify). The
            # grammar took `notify=` out of the overrides: it is never a component input.
            plan.policy[NOTIFY_REQUESTER] = cmd.notify
        plan.catalog_revision = self.revision
        trained = next((entry for entry, _, what in uses if what == "trains on"), None)
        if trained is not None and recipe.spec.dataset is not None:
            plan.train_rows = trained.rows.get(recipe.spec.dataset.split)
            plan.train_row_bytes = trained.row_bytes.get(recipe.spec.dataset.split)
        problem = generation_problem(component_trainer(component), plan.params)
        if problem:
            raise PlanError(f"recipe {recipe.name}: {problem}")
        plan.cost = cost_profile(plan.resources, choice.presets, self.pricing, plan.operation)
        if plan.memory is not None and plan.memory.fits is False:
            plan.fitting_presets = presets_that_fit(recipe, component, plan, self.presets.values(), self.repo_root)
        elif cmd.force:
            plan.warnings.append(unneeded_force(plan))
        return mark_distributed(plan)

    def data_uses(self, recipe: Recipe, chosen: DatasetEntry | None = None) -> list[tuple[DatasetEntry, str, str]]:
        """The local datasets a run of `recipe` reads, with the split and what reads it."""
        uses: list[tuple[DatasetEntry, str, str]] = []
        train = recipe.spec.dataset
        entry = chosen or self.dataset_of(train)
        if entry is not None and train is not None:
            uses.append((entry, train.split, "trains on"))
        evaluation = recipe.spec.eval
        if evaluation is not None and evaluation.split:
            evaluated = self.dataset_of(evaluation.dataset) if evaluation.dataset is not None else entry
            if evaluated is not None:
                uses.append((evaluated, evaluation.split, "evaluates on"))
        return uses

    def dataset_of(self, ref: DatasetRef | None) -> DatasetEntry | None:
        """The checked dataset a recipe's `dataset:` names: a catalog entry, or its own local folder."""
        if ref is None:
            return None
        return dataset_entry(ref, self.datasets) or (self.recipe_data.get(ref.path) if ref.path else None)

    @on_snapshot
    def plan_preflight(self, cmd: RunCommand, *, require_local: bool = True) -> Plan:
        """Compile the preflight of a distributed recipe with the pins, presets and overrides `run` would use."""
        run_plan = self.plan(cmd, require_local=require_local)
        recipe = self.recipe(cmd.recipe)
        spec = recipe.spec.preflight or PreflightSpec()
        checker = self.components.get(spec.component)
        if checker is None:
            raise PlanError(f"recipe {recipe.name} names preflight component {spec.component}, which is not loaded")
        choice = presets_for_run(cmd.presets, recipe, self.components[recipe.spec.component], self.presets)
        return compile_preflight(cmd, run_plan, recipe, checker, choice, self._pinner, require_local=require_local)

    @on_snapshot
    def plan_sweep(self, cmd: SweepCommand, *, require_local: bool = True) -> SweepPlan:
        """Compile a `sweep` command: its space checked against the recipe's overrides, one matrix operation."""
        recipe = self.recipe(cmd.recipe)
        component = self.components[recipe.spec.component]
        return plan_sweep(cmd, recipe, component, lambda run_cmd: self.plan(run_cmd, require_local=require_local))

    @on_snapshot
    def plan_serving_check(self, recipe_name: str, *, checkpoint: str, model_run: str = "") -> tuple[Plan, str]:
        """Compile the serving check of a registered checkpoint trained by `recipe_name`, and its spec digest.

        `checkpoint` is a path inside the artifacts of run `model_run` (as lineage records it), or absolute."""
        plan, digest = compile_serving_check(
            self.recipe(recipe_name),
            self.components,
            self.presets,
            checkpoint=checkpoint,
            model_run=model_run,
            repo_root=self.repo_root,
        )
        presets = [self.presets[name] for name in plan.presets if name in self.presets]
        plan.cost = cost_profile(plan.resources, presets, self.pricing, plan.operation)
        return plan, digest

    @on_snapshot
    def plan_eval(self, recipe_name: str, *, base: ChainBase, subject: str, suite: str | None = None) -> Plan:
        """Compile the evaluation of `base` (a confirmed model of recipe `recipe_name`) on `suite` (default: the
        recipe's own), as a run of kind `eval`."""
        recipe = self.recipe(recipe_name)
        chosen = find_suite(self.suites, suite) if suite is not None else default_suite(recipe, self.suites)
        plan = compile_eval(recipe, chosen, self.components, self.presets, self._pinner, base=base, subject=subject)
        presets = [self.presets[name] for name in plan.presets if name in self.presets]
        plan.cost = cost_profile(plan.resources, presets, self.pricing, plan.operation)
        return plan

    def missing_local_builds(self) -> list[str]:
        """Build commands of local models and datasets that recipes name but that are not built yet."""
        builds: dict[str, None] = {}
        for recipe in self.recipes.values():
            for ref in (recipe.spec.model, recipe.spec.dataset):
                if ref is None or ref.path is None or ref.build is None:
                    continue
                path = Path(ref.path)
                if not (path if path.is_absolute() else self.repo_root / path).exists():
                    builds[ref.build] = None
        return list(builds)


def unneeded_force(plan: Plan) -> str:
    """Why `--force` changes nothing for a plan that is not over its memory estimate.

    Like `--skip-preflight` with nothing to skip, the run goes ahead as typed (refusing would only make the user
    type it again) and the flag is named as unused, so nobody reads the run as one forced past a limit.
    """
    if plan.memory is None:
        why = "there is no memory estimate for this run to go over"
    elif plan.memory.fits is None:
        why = f"its presets set no memory budget to compare the estimate with ({plan.memory.summary()})"
    else:
        why = f"the memory estimate fits its presets ({plan.memory.summary()})"
    return f"--force is not needed: {why}; the run goes ahead as usual and is not recorded as forced"
