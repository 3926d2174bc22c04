"""Compiling an evaluation run: a finished model and a harness suite in, one operation of kind `eval` out.

`/finetune eval RUN|MODEL:VERSION [suite=NAME]` evaluates a model the bot has confirmed (a run's final model, read
back by `outputs` and pinned by its digest) on a suite of the catalog, by default the one the model's recipe is
evaluated on. The job is the `lm-eval` component (`python -m trainer.eval_run`): the model folder is copied into
its context by the same init step a chained run uses and checked against its digest before loading; the suite's
contract (fields, hash, inputs) is the one a training run on that suite carries, so the two are comparable.
Image, code and the recipe's presets are the recipe's: the eval runs the code and environment it trained with.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.catalog.choices import ChainBase
from bot.catalog.errors import PlanError
from bot.catalog.harness import Suite
from bot.catalog.manifests import Component, Preset, Recipe
from bot.catalog.pins import Pinner
from bot.catalog.plan import Plan
from bot.catalog.presets import presets_for_run
from bot.catalog.resources import summarize_resources
from bot.polyaxon.spec import OperationSpecError, compile_operation

EVAL_COMPONENT = "lm-eval"


def default_suite(recipe: Recipe, suites: Mapping[str, Suite]) -> Suite:
    """The suite a recipe's runs are evaluated on: its eval contract's, or a PlanError naming the suites."""
    name = recipe.spec.eval.suite if recipe.spec.eval is not None else None
    if name is None:
        known = ", ".join(suites) or "none"
        raise PlanError(
            f"recipe {recipe.name}'s eval contract is the trainer's own, measured during training (its card and "
            f"`/finetune compare` show it); name a harness suite to evaluate on: `suite=NAME` (suites: {known})"
        )
    suite = suites.get(name)
    if suite is None:
        raise PlanError(f"recipe {recipe.name} names eval suite {name}, which is not in the catalog")
    return suite


def compile_eval(
    recipe: Recipe,
    suite: Suite,
    components: Mapping[str, Component],
    presets: Mapping[str, Preset],
    pinner: Pinner,
    *,
    base: ChainBase,
    subject: str,
) -> Plan:
    """The plan of an evaluation of `base` (a confirmed model trained by `recipe`) on `suite`."""
    component = components.get(EVAL_COMPONENT)
    if component is None:
        raise PlanError(f"the catalog has no {EVAL_COMPONENT} component, so nothing can evaluate a model")
    source = f"recipe {recipe.file}"
    params: dict[str, Any] = {}
    provenance: dict[str, str] = {}

    def put(name: str, value: Any, origin: str) -> None:
        if name in component.inputs:
            params[name], provenance[name] = value, origin

    for name, value in component.defaults().items():
        put(name, value, "component default")
    warnings: list[str] = []
    pins, unpinned = pinner.pin(recipe, component, put, warnings, True)
    if unpinned and not recipe.spec.exploration:
        raise PlanError(f"recipe {recipe.name} is not pinned: {'; '.join(unpinned)}")
    for name, value in recipe.spec.defaults.items():
        if name == "dtype":  # the only training default an evaluation shares: how the weights are loaded
            put(name, value, source)
    for name, (value, origin) in base.params().items():
        put(name, value, origin)
    contract, contract_hash = pinner.suite_contract(suite.name, pins, put, f"/finetune eval suite={suite.name}")
    put("recipe_name", recipe.name, source)
    put("recipe_hash", recipe.hash, f"computed: sha256 of {recipe.file}")
    put("subject", subject, "command line: what /finetune eval evaluates")
    missing = component.unset(params)
    if missing:
        raise PlanError(f"component {component.name} has inputs the bot can't set: {', '.join(missing)}")
    choice = presets_for_run([], recipe, component, presets)
    try:
        operation = compile_operation(component.document, [*(p.document for p in choice.presets), base.patch()], params)
    except OperationSpecError as exc:
        raise PlanError(f"the evaluation of {subject} on suite {suite.name}: {exc}") from exc
    pins["base"] = f"{base.run_name}@{base.model_digest}"
    pins.pop("dataset", None)  # the training data is not what an evaluation reads
    return Plan(
        recipe=recipe.name,
        recipe_file=recipe.file,
        recipe_hash=recipe.hash,
        component=component.name,
        operation=operation,
        params=params,
        provenance=provenance,
        presets=[p.name for p in choice.presets],
        preset_sources=choice.sources,
        pins=pins,
        comparable=not unpinned,
        unpinned=unpinned,
        eval_contract=contract,
        eval_contract_hash=contract_hash,
        resources=summarize_resources(operation, component.run_kind, choice.presets),
        warnings=warnings,
        tags=[f"recipe:{recipe.name}", "eval", f"suite:{suite.name}", *[f"preset:{p.name}" for p in choice.presets]],
        kind="eval",
    )
