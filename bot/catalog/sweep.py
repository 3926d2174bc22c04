"""Compiling a sweep: a recipe's declared overrides searched over a checked space, as one Polyaxon matrix operation.

Every swept key must be one the recipe declares, and every value (each listed one, both ends of a range) must
pass that key's type and bounds before anything is submitted; a range needs a float key. The fixed keys and
presets compile exactly as `run` does (the same `Plan`), the swept inputs leave the operation's params, and
the matrix section (`grid` or `random`, `concurrency`, `numRuns`, `seed`, `earlyStopping` on the eval
contract's target) goes on it, so Polyaxon owns the trials.

Polyaxon's `loguniform(low, high)` samples `exp(uniform(low, high))`: its bounds are natural logs. The user
writes the values themselves (`loguniform(1e-4,1e-2)`), so the matrix carries `ln` of each end.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Callable
from typing import Any

from pydantic import BaseModel, Field

from bot.catalog.choices import swept_groups_problem
from bot.catalog.contract import primary_metric
from bot.catalog.errors import PlanError
from bot.catalog.gate import MEMORY_PARAMS
from bot.catalog.manifests import Component, Recipe
from bot.catalog.overrides import NotAnIntError, OverrideSpec, find_override
from bot.catalog.plan import Plan
from bot.catalog.trainers import component_trainer
from bot.grammar import RunCommand, Scalar, SweepAxis, SweepCommand, scalar_text
from bot.grammar.sweep import NEEDS_TRIALS, whole_range, whole_values
from bot.polyaxon.spec import OperationSpecError, check_operation


class SweptKey(BaseModel):
    """One swept key, checked: the component input it sets and its typed values or range."""

    key: str
    input: str
    kind: str  # choice, uniform, loguniform
    values: list[Scalar] = Field(default_factory=list)
    low: float | None = None
    high: float | None = None

    def describe(self) -> str:
        """`lr ∈ {0.01, 0.05}` / `lr ~ loguniform(0.0001, 0.01)`."""
        if self.kind == "choice":
            return f"{self.key} ∈ {{{', '.join(scalar_text(v) for v in self.values)}}}"
        return f"{self.key} ~ {self.kind}({self.low:g}, {self.high:g})"


class SweepPlan(BaseModel):
    """A compiled sweep: the matrix operation (in `plan`) and what the card and leaderboard need."""

    plan: Plan
    mode: str
    trials: int
    concurrency: int
    seed: int | None = None
    space: list[SweptKey]
    metric: str
    higher: bool
    target: float | None = None
    matrix: dict[str, Any]
    notes: list[str] = Field(default_factory=list)


def plan_sweep(
    cmd: SweepCommand,
    recipe: Recipe,
    component: Component,
    plan_run: Callable[[RunCommand], Plan],
) -> SweepPlan:
    """Check the space against the recipe, compile the fixed part as `run` would, and put the matrix on it."""
    if recipe.spec.eval is None:
        raise PlanError(
            f"recipe {recipe.name} declares no eval contract (`eval:`), so its trials could not be ranked; "
            "a sweep needs one (its first metric ranks the trials)"
        )
    space = [_check_axis(recipe, component, key, axis) for key, axis in cmd.space.items()]
    if cmd.trials is None:  # the grammar left it to the axes' types, which hold: only the sample size is missing
        raise PlanError(NEEDS_TRIALS)
    trials: int = cmd.trials
    concurrency = min(cmd.concurrency, trials)
    inputs = [swept.input for swept in space]
    doubled = sorted({name for name in inputs if inputs.count(name) > 1})
    if doubled:
        keys = [swept.key for swept in space if swept.input == doubled[0]]
        raise PlanError(f"{' and '.join(keys)} both set {doubled[0]}: sweep it once")
    fixed_inputs = {find_override(recipe, component, key).input: key for key in cmd.overrides}
    for swept in space:
        if swept.input in fixed_inputs:
            raise PlanError(f"{swept.key} is swept and also fixed by {fixed_inputs[swept.input]}=…: give it once")
    base = RunCommand(
        recipe=cmd.recipe, presets=cmd.presets, overrides=cmd.overrides, written=cmd.written, dry_run=cmd.dry_run
    )
    plan = plan_run(_heaviest(base, space))
    if any(swept.input in MEMORY_PARAMS for swept in space):
        # The memory estimate above is of the heaviest trial; the sweep's own plan is the fixed part alone.
        memory, fitting = plan.memory, plan.fitting_presets
        plan = plan_run(base)
        plan.memory, plan.fitting_presets = memory, fitting
    lists = {swept.input: (list(swept.values) if swept.kind == "choice" else None) for swept in space}
    problem = swept_groups_problem(component_trainer(component), plan.params, lists)
    if problem:
        raise PlanError(f"sweep of {recipe.name}: {problem}")
    # The first metric the recipe lists ranks the trials (the stored contract keeps its metrics sorted).
    metric, higher = primary_metric({"primary_metric": recipe.spec.eval.metrics[0]})
    target = recipe.spec.eval.target
    seed = cmd.sampler_seed
    if cmd.mode == "random" and seed is None:
        seed = derived_seed(cmd)
    matrix = compile_matrix(cmd.mode, space, trials=trials, concurrency=concurrency, seed=seed)
    if target is not None:
        matrix["earlyStopping"] = [
            {
                "kind": "metric_early_stopping",
                "metric": metric,
                "value": target,
                "optimization": "maximize" if higher else "minimize",
            }
        ]
    operation = dict(plan.operation)
    operation["params"] = {k: v for k, v in (operation.get("params") or {}).items() if k not in inputs}
    operation["matrix"] = matrix
    # Polyaxon caches a pipeline's trials by default: a trial with the inputs of an earlier one would "succeed" at
    # once with the earlier run's results and no run of its own. A sweep's trials always train.
    operation["cache"] = {"disable": True}
    try:
        check_operation(operation)
    except OperationSpecError as exc:
        raise PlanError(f"{recipe.name}: {exc}") from exc
    params = {k: v for k, v in plan.params.items() if k not in inputs}
    provenance = {k: v for k, v in plan.provenance.items() if k not in inputs}
    for swept in space:
        provenance[swept.input] = f"swept: {swept.describe()}"
    sweep_plan = plan.model_copy(
        update={
            "kind": "sweep",
            "operation": operation,
            "params": params,
            "provenance": provenance,
            "tags": [*plan.tags, f"sweep:{cmd.mode}"],
        }
    )
    return SweepPlan(
        plan=sweep_plan,
        mode=cmd.mode,
        trials=trials,
        concurrency=concurrency,
        seed=seed,
        space=space,
        metric=metric,
        higher=higher,
        target=target,
        matrix=matrix,
        notes=list(cmd.notes),
    )


def compile_matrix(
    mode: str, space: list[SweptKey], *, trials: int, concurrency: int, seed: int | None
) -> dict[str, Any]:
    """Polyaxon's matrix section (`V1GridSearch` / `V1RandomSearch`) for a checked space."""
    params: dict[str, Any] = {}
    for swept in space:
        if swept.kind == "choice":
            params[swept.input] = {"kind": "choice", "value": list(swept.values)}
        elif swept.kind == "uniform":
            params[swept.input] = {"kind": "uniform", "value": [swept.low, swept.high]}
        else:
            assert swept.low is not None and swept.high is not None
            params[swept.input] = {"kind": "loguniform", "value": [math.log(swept.low), math.log(swept.high)]}
    matrix: dict[str, Any] = {"kind": mode, "concurrency": concurrency, "numRuns": trials, "params": params}
    if mode == "random" and seed is not None:
        matrix["seed"] = seed
    return matrix


def derived_seed(cmd: SweepCommand) -> int:
    """A random search's seed from what the command asks (recipe, presets, fixed keys, space, trials)."""
    payload = {
        "recipe": cmd.recipe,
        "presets": cmd.presets,
        "fixed": {k: str(v) for k, v in sorted(cmd.overrides.items())},
        "space": {k: axis.model_dump() for k, axis in sorted(cmd.space.items())},
        "trials": cmd.trials,
    }
    digest = hashlib.sha256(json.dumps(payload, sort_keys=True, default=str).encode()).hexdigest()
    return int(digest[:8], 16) % (2**31 - 1)


def _check_axis(recipe: Recipe, component: Component, key: str, axis: SweepAxis) -> SweptKey:
    override = find_override(recipe, component, key)
    if axis.kind == "choice":
        values = [_coerce(override, key, value, text) for value, text in zip(axis.values, axis.texts, strict=True)]
        if len({json.dumps(v) for v in values}) < len(values):
            raise PlanError(f"{key}={axis.describe()}: two values are the same once typed ({override.describe()})")
        return SweptKey(key=key, input=override.input, kind="choice", values=values)
    if override.type != "float":
        listed = whole_values(axis) if whole_range(axis) else "V1,V2,…"
        raise PlanError(
            f"{key}={axis.describe()}: {key} is {override.describe()}, and {axis.kind} samples real numbers; "
            f"list its values instead: {key}={listed} (a grid: every value, no trials=N needed) or "
            f"{key}=choice({listed}) mode=random trials=N"
        )
    assert axis.low is not None and axis.high is not None
    _coerce(override, key, axis.low, f"{axis.low:g}")
    _coerce(override, key, axis.high, f"{axis.high:g}")
    return SweptKey(key=key, input=override.input, kind=axis.kind, low=axis.low, high=axis.high)


def _coerce(override: OverrideSpec, key: str, value: Scalar, text: str) -> Scalar:
    try:
        return override.coerce(value, key=key, written=text)
    except NotAnIntError as exc:
        raise PlanError(str(exc)) from None
    except ValueError as exc:
        raise PlanError(f"{key}={text} (in the sweep): {exc}") from None


def _heaviest(base: RunCommand, space: list[SweptKey]) -> RunCommand:
    """The fixed command plus, for each swept memory param, its largest value: the trial the estimate is of."""
    heavy: dict[str, Scalar] = {}
    for swept in space:
        if swept.input not in MEMORY_PARAMS:
            continue
        if swept.kind == "choice":
            numbers = [v for v in swept.values if isinstance(v, int | float) and not isinstance(v, bool)]
            flags = [v for v in swept.values if isinstance(v, bool)]
            if numbers:
                heavy[swept.key] = max(numbers)
            elif flags:
                heavy[swept.key] = False if swept.input == "gradient_checkpointing" else max(flags)
        elif swept.high is not None:
            heavy[swept.key] = swept.high
    return base.model_copy(update={"overrides": {**base.overrides, **heavy}}) if heavy else base
