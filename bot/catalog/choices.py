"""A recipe's trainer, its catalog dataset and its reward functions: checked when the catalog loads, chosen per run.

Where the loader and the compile step share a rule: the trainer a recipe runs is its TRL component's (a
component tagged `trl` and a trainer name); a catalog dataset must be in a format that trainer takes (named with
the columns it needs and those the dataset has); GRPO and RLOO name known reward functions whose columns the
dataset has; the eval contract names the trainer's procedure and only metrics that procedure writes.
`dataset=NAME` and `rewards=a,b` on the command line are taken out of the overrides here and checked by the
same rules, before anything reads the disk or is submitted.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bot.catalog.datasets import DatasetEntry
from bot.catalog.errors import CatalogError, PlanError
from bot.catalog.formats import TRAINER_TITLES, mismatch, trainer_takes
from bot.catalog.harness import HARNESS_INPUTS, HARNESS_PROCEDURE, Suite
from bot.catalog.manifests import Component, DatasetRef, Recipe, RecipeFile
from bot.catalog.rewards import RewardFunction, choose_rewards, missing_reads
from bot.catalog.trainers import TrainerKind, component_trainer, unknown_metrics
from bot.grammar import closest, did_you_mean

# Override keys that are catalog choices, not component inputs.
DATASET_KEY = "dataset"
REWARDS_KEY = "rewards"
BASE_KEY = "base"  # a finished run whose final model a run starts from (`ChainBase`, resolved by the run service)
MODEL_FOLDER = "outputs/model"  # where a run's final model is, in its artifacts (the trainer's output contract)


@dataclass(frozen=True)
class ChainBase:
    """The run a `base=RUN` names, as the run service found it: confirmed by `outputs`, its final model's digest."""

    run_name: str
    run_uuid: str
    model_digest: str
    model_pin: str  # the model that run started from (its `model` pin): a chained run's recipe must start there too

    def patch(self) -> dict[str, Any]:
        """A preset-shaped document: an init step copying the base model into the run's context before it starts."""
        init = [{"artifacts": {"dirs": [f"{self.run_uuid}/{MODEL_FOLDER}"]}}]
        return {"kind": "operation", "isPreset": True, "runPatch": {"init": init}}

    def params(self) -> dict[str, tuple[Any, str]]:
        """The inputs a chained run gets: the model folder inside the base run's artifacts, its run and digest."""
        origin = f"command line: base={self.run_name} (its final model, confirmed by outputs)"
        return {
            "model_name_or_path": (MODEL_FOLDER, origin),
            "base_run": (self.run_uuid, origin),
            "base_model_digest": (self.model_digest, origin),
        }


def dataset_entry(ref: DatasetRef | None, datasets: dict[str, DatasetEntry]) -> DatasetEntry | None:
    """The catalog entry a recipe's dataset names (by `name`, or by the same local `path`), or None."""
    if ref is None:
        return None
    if ref.name is not None:
        return datasets.get(ref.name)
    return next((e for e in datasets.values() if e.spec.path is not None and e.spec.path == ref.path), None)


def resolve_dataset(ref: DatasetRef, entry: DatasetEntry) -> DatasetRef:
    """A recipe's `dataset: {name: NAME}` as the pins read it: the entry's path or id, revision, digest, build."""
    spec = entry.spec
    return ref.model_copy(
        update={"path": spec.path, "id": spec.id, "revision": spec.revision, "digest": spec.digest, "build": spec.build}
    )


def find_dataset(name: str, datasets: dict[str, DatasetEntry]) -> DatasetEntry:
    """The catalog dataset called `name`, or a PlanError with the closest names (never a path or URL)."""
    if name in datasets:
        return datasets[name]
    suggestions = closest(name, list(datasets))
    raise PlanError(
        f"no dataset {name!r} in the catalog{did_you_mean(suggestions)}; datasets are chosen by name among "
        f"{', '.join(datasets) or '(none)'}, never by path or URL",
        suggestions=suggestions,
    )


def format_problem(kind: TrainerKind, entry: DatasetEntry, split: str) -> str | None:
    """Why `kind` cannot train on `split` of the dataset (the columns it needs and those it has), or None."""
    data = entry.format_of(split)
    if trainer_takes(kind.name, data):
        return None
    return mismatch(kind.name, entry.name, data, entry.columns_of(split))


def reward_columns_problem(
    names: tuple[str, ...], rewards: dict[str, RewardFunction], entry: DatasetEntry | None, split: str
) -> str | None:
    """Why the dataset cannot feed these reward functions (a column one reads is missing from `split`), or None; a
    local dataset not built yet, whose rows were not read, is checked by the job instead."""
    read = entry.columns.get(split) if entry is not None else None
    lacking = missing_reads(names, rewards, read) if read is not None else None
    return f"{lacking}, which dataset {entry.name} lacks" if lacking and entry is not None else None


def contract_problem(kind: TrainerKind, spec: RecipeFile, rewards: tuple[str, ...]) -> str | None:
    """Why the recipe's eval contract is not what its trainer writes, or None."""
    if spec.eval is None:
        return None
    return unknown_metrics(kind, spec.eval.procedure_version, list(spec.eval.metrics), rewards)


@dataclass(frozen=True)
class RunChoices:
    """What a `run` chose besides its overrides: the dataset (a catalog entry) and the reward functions."""

    dataset: DatasetEntry | None = None
    rewards: tuple[str, ...] = ()
    given: frozenset[str] = frozenset()  # which of `dataset`, `rewards`, `base` the command line gave
    base: str | None = None  # the RUN of `base=RUN`, as typed


def take_choices(
    recipe: Recipe,
    component: Component,
    overrides: dict[str, Any],
    datasets: dict[str, DatasetEntry],
    rewards: dict[str, RewardFunction],
) -> tuple[RunChoices, dict[str, Any]]:
    """Take `dataset=` and `rewards=` out of a command's overrides, checked; (the choices, the other overrides)."""
    rest = dict(overrides)
    kind = component_trainer(component)
    chosen_dataset = rest.pop(DATASET_KEY, None)
    chosen_rewards = rest.pop(REWARDS_KEY, None)
    chosen_base = rest.pop(BASE_KEY, None)
    if chosen_base is not None and kind is None:
        raise PlanError(f"recipe {recipe.name} does not train a TRL model, so it cannot start from a run's (base=)")
    split = recipe.spec.dataset.split if recipe.spec.dataset is not None else "train"
    entry = None if chosen_dataset is None else _take_dataset(recipe, kind, str(chosen_dataset), split, datasets)
    reward_names = tuple(recipe.spec.rewards)
    if chosen_rewards is not None:
        if kind is None or not kind.takes_rewards:
            raise PlanError(f"recipe {recipe.name} trains with no reward functions; rewards= is for GRPO and RLOO")
        reward_names = choose_rewards(str(chosen_rewards), rewards)
    if kind is not None and kind.takes_rewards:
        lacking = reward_columns_problem(
            reward_names, rewards, entry or dataset_entry(recipe.spec.dataset, datasets), split
        )
        if lacking:
            raise PlanError(lacking)
        problem = contract_problem(kind, recipe.spec, reward_names)
        if problem:
            raise PlanError(f"recipe {recipe.name}'s eval contract with rewards={','.join(reward_names)}: {problem}")
    given = frozenset(key for key in (DATASET_KEY, REWARDS_KEY, BASE_KEY) if key in overrides)
    base = None if chosen_base is None else str(chosen_base)
    return RunChoices(dataset=entry, rewards=reward_names, given=given, base=base), rest


def _take_dataset(
    recipe: Recipe, kind: TrainerKind | None, name: str, split: str, datasets: dict[str, DatasetEntry]
) -> DatasetEntry:
    """The catalog dataset `dataset=NAME` chose, checked: known, in the trainer's format, with the recipe's splits,
    and one the recipe lets runs choose."""
    entry = find_dataset(name, datasets)
    problem = format_problem(kind, entry, split) if kind is not None else None
    if problem:
        raise PlanError(f"dataset={entry.name} cannot train recipe {recipe.name}: {problem}")
    evaluates = recipe.spec.eval.split if recipe.spec.eval and recipe.spec.eval.dataset is None else None
    known = entry.split_names
    for wanted in (split, evaluates):
        if wanted is not None and known and wanted not in known:
            uses = f"recipe {recipe.name} trains on {split!r}" + (
                f" and evaluates on {evaluates!r}" if evaluates else ""
            )
            raise PlanError(f"dataset {entry.name} has no split {wanted!r} (splits: {', '.join(known)}); {uses}")
    allowed = recipe.spec.datasets
    if allowed != "any" and entry.name not in allowed and entry is not dataset_entry(recipe.spec.dataset, datasets):
        choices = ", ".join(allowed) if allowed else "none"
        raise PlanError(f"recipe {recipe.name} does not let runs choose dataset {entry.name} (choices: {choices})")
    return entry


def with_dataset(recipe: Recipe, entry: DatasetEntry) -> Recipe:
    """The recipe as a run that chose catalog dataset `entry` trains it: same split, the entry's pins."""
    split = recipe.spec.dataset.split if recipe.spec.dataset is not None else "train"
    ref = resolve_dataset(DatasetRef(name=entry.name, split=split), entry)
    return recipe.model_copy(update={"spec": recipe.spec.model_copy(update={"dataset": ref})})


def check_recipe(
    rel: str,
    spec: RecipeFile,
    component: Component,
    datasets: dict[str, DatasetEntry],
    rewards: dict[str, RewardFunction],
    suites: dict[str, Suite],
) -> RecipeFile:
    """A recipe's trainer, catalog dataset, rewards and eval contract checked at load; the spec with its catalog
    dataset resolved to what the pins read, and a harness suite's metrics in its contract. Raises CatalogError
    naming the file and field."""
    kind = component_trainer(component)
    if spec.trainer is not None and (kind is None or kind.name != spec.trainer):
        runs = f"runs the {kind.name} trainer" if kind is not None else "is not a TRL trainer's"
        raise CatalogError(rel, "trainer", f"{spec.trainer}, but component {component.name} {runs}")
    for field, ref in (("dataset", spec.dataset), ("eval.dataset", spec.eval.dataset if spec.eval else None)):
        if ref is not None and ref.name is not None and ref.name not in datasets:
            suggestions = closest(ref.name, list(datasets))
            raise CatalogError(rel, f"{field}.name", f"no dataset {ref.name!r}{did_you_mean(suggestions)}")
    if spec.datasets != "any":
        for name in spec.datasets:
            if name not in datasets:
                raise CatalogError(rel, "datasets", f"no dataset {name!r}{did_you_mean(closest(name, list(datasets)))}")
    if spec.rewards and (kind is None or not kind.takes_rewards):
        raise CatalogError(rel, "rewards", "only GRPO and RLOO recipes take reward functions")
    for name in spec.rewards:
        if name not in rewards:
            raise CatalogError(rel, "rewards", f"no reward function {name!r}; known: {', '.join(rewards) or '(none)'}")
    if kind is not None:
        entry = dataset_entry(spec.dataset, datasets)
        if entry is not None and spec.dataset is not None:
            problem = format_problem(kind, entry, spec.dataset.split)
            if problem:
                raise CatalogError(rel, "dataset", problem)
            lacking = reward_columns_problem(tuple(spec.rewards), rewards, entry, spec.dataset.split)
            if lacking:
                raise CatalogError(rel, "rewards", lacking)
        if kind.takes_rewards and not spec.rewards:
            raise CatalogError(rel, "rewards", f"a {kind.name} recipe names its default reward functions")
        problem = contract_problem(kind, spec, tuple(spec.rewards)) if suite_of(spec) is None else None
        if problem:
            raise CatalogError(rel, "eval", problem)
    updates: dict[str, Any] = {}
    suite_name = suite_of(spec)
    if suite_name is not None and spec.eval is not None:
        problem = suite_problem(suite_name, suites, component, kind)
        if problem:
            raise CatalogError(rel, "eval.suite", problem)
        # The suite's metrics are the contract's: what ranks runs, and what criteria and sweeps may name.
        suite = suites[suite_name]
        updates["eval"] = spec.eval.model_copy(
            update={"metrics": list(suite.spec.metrics), "procedure_version": HARNESS_PROCEDURE}
        )
    if spec.dataset is not None and spec.dataset.name is not None:
        updates["dataset"] = resolve_dataset(spec.dataset, datasets[spec.dataset.name])
    if spec.eval is not None and spec.eval.dataset is not None and spec.eval.dataset.name is not None:
        eval_ref = resolve_dataset(spec.eval.dataset, datasets[spec.eval.dataset.name])
        updates["eval"] = spec.eval.model_copy(update={"dataset": eval_ref})
    return spec.model_copy(update=updates) if updates else spec


def suite_of(spec: RecipeFile) -> str | None:
    """The harness suite a recipe's eval contract names, or None."""
    return spec.eval.suite if spec.eval is not None else None


def suite_problem(name: str, suites: dict[str, Suite], component: Component, kind: TrainerKind | None) -> str | None:
    """Why a recipe on `component` cannot be evaluated by suite `name`, or None."""
    if name not in suites:
        return f"no suite {name!r}{did_you_mean(closest(name, list(suites)))}; suites: {', '.join(suites) or 'none'}"
    lacking = [item for item in HARNESS_INPUTS if item not in component.inputs]
    if lacking:
        return f"component {component.name} runs no evaluation harness (it has no input {', '.join(lacking)})"
    if kind is not None and not kind.causal_lm:
        return f"the {kind.name} trainer's model scores sequences; lm-eval evaluates language models"
    return None


def generation_problem(kind: TrainerKind | None, params: dict[str, Any]) -> str | None:
    """Why a GRPO or RLOO run's batch cannot hold whole groups of completions (TRL refuses it at start), or None."""
    if kind is None or not kind.takes_rewards:
        return None
    group = int(params.get("num_generations") or 0)
    batch = int(params.get("per_device_train_batch_size") or 1) * int(params.get("gradient_accumulation_steps") or 1)
    if group < 2:
        return f"num_generations={group}: {TRAINER_TITLES[kind.name]} compares at least 2 completions of each prompt"
    if batch % group:
        fits = -(-batch // group) * group
        return (
            f"{TRAINER_TITLES[kind.name]} generates num_generations={group} completions of each prompt, so the batch "
            f"(batch size x gradient accumulation = {batch}) must hold whole groups: a multiple of {group}, "
            f"e.g. batch_size={fits // int(params.get('gradient_accumulation_steps') or 1) or group}"
        )
    return None


GROUP_INPUTS = ("per_device_train_batch_size", "gradient_accumulation_steps", "num_generations")


def swept_groups_problem(
    kind: TrainerKind | None, fixed: dict[str, Any], swept: dict[str, list[Any] | None]
) -> str | None:
    """Why some trial of a GRPO/RLOO sweep would not hold whole groups of completions, or None.

    `swept` maps each swept input to its listed values (the group inputs are ints, which a sweep only lists)."""
    if kind is None or not kind.takes_rewards:
        return None
    grouped = {name: values for name, values in swept.items() if name in GROUP_INPUTS}
    combos: list[dict[str, Any]] = [dict(fixed)]
    for name, values in grouped.items():
        combos = [{**combo, name: value} for combo in combos for value in values or []]
    for combo in combos:
        problem = generation_problem(kind, combo)
        if problem:
            trial = ", ".join(f"{name}={combo[name]}" for name in grouped)
            return f"the trial with {trial}: {problem}"
    return None
