"""The compile step: a parsed `run` command, its recipe and presets in; a validated, pinned `Plan` out.

Each effective param records where it came from, in the order later sources win: the component's
defaults, the recipe's pins, the recipe's `defaults`, the presets' params, the command line; then
the eval contract and the recipe's name and hash. Polyaxon's checker compiles the operation
(`bot.polyaxon.spec`); the presets' resources, the warnings and the memory estimate follow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, Field

from bot.catalog.alerts import health_policy
from bot.catalog.cost import CostProfile
from bot.catalog.errors import PlanError
from bot.catalog.manifests import Component, Recipe
from bot.catalog.memory import MemoryEstimate, estimate_run_memory
from bot.catalog.overrides import coerce_overrides
from bot.catalog.pins import Pinner
from bot.catalog.policy import run_policy
from bot.catalog.presets import PresetChoice
from bot.catalog.resources import cluster_provenance, replacement_warnings, resource_warnings, summarize_resources
from bot.grammar import RunCommand
from bot.polyaxon.spec import OperationSpecError, compile_operation


class Plan(BaseModel):
    """A compiled run: what `--dry-run` shows and what the gateway submits."""

    recipe: str
    recipe_file: str
    recipe_hash: str
    # The catalog's revision it was planned from (a git commit, or a content digest), when its loader knew it.
    catalog_revision: str | None = None
    # The training split's rows and the mean bytes of one, when the catalog read them (a local dataset): what an
    # estimate of a run by epochs, and of its tokens per row, rests on.
    train_rows: int | None = None
    train_row_bytes: float | None = None
    component: str
    operation: dict[str, Any]
    params: dict[str, Any]
    provenance: dict[str, str]
    presets: list[str]
    # preset name -> "recipe default" or "command line"; (recipe default, the user's preset that replaced it)
    preset_sources: dict[str, str] = Field(default_factory=dict)
    replaced_presets: list[tuple[str, str]] = Field(default_factory=list)
    pins: dict[str, str]
    comparable: bool
    unpinned: list[str] = Field(default_factory=list)
    eval_contract: dict[str, Any] = Field(default_factory=dict)
    eval_contract_hash: str = ""
    resources: dict[str, Any] = Field(default_factory=dict)
    warnings: list[str] = Field(default_factory=list)
    memory: MemoryEstimate | None = None
    # When the memory estimate is over budget: the resources presets under which this run would fit.
    fitting_presets: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    dry_run: bool = False
    # "train", or "preflight" for the validation run of a distributed recipe.
    kind: str = "train"
    # Distributed runs (a pytorchjob) pass the smoke-first gate (bot.catalog.gate): what identifies the recipe,
    # pins, presets and memory-relevant params a preflight validated, and the ranks the presets start.
    distributed: bool = False
    gate_key: str = ""
    expected_world_size: int = 1
    # How the gate was passed, filled by the run service for the dry-run and the card: a passed preflight's
    # evidence or who skipped it.
    validation: dict[str, Any] | None = None
    # The failure policy the run is stored with (bot.catalog.policy): retries, start deadline, notify channel.
    policy: dict[str, Any] = Field(default_factory=dict)
    # What it holds while running and what an hour costs (bot.catalog.cost); the estimate is the run service's.
    cost: CostProfile | None = None

    @property
    def over_memory_budget(self) -> bool:
        """The preflight estimate says this run does not fit the presets' memory: it is refused unless forced."""
        return self.memory is not None and self.memory.fits is False


def compile_plan(
    cmd: RunCommand,
    recipe: Recipe,
    component: Component,
    choice: PresetChoice,
    pinner: Pinner,
    *,
    require_local: bool = True,
    derived: Mapping[str, tuple[Any, str]] | None = None,
    patches: Sequence[dict[str, Any]] = (),
) -> Plan:
    """Compile a `run` command with its recipe, component and presets into a `Plan`, or raise `PlanError`.

    `derived` are params the catalog computes (value, origin), set after the command line; `patches` are preset-shaped
    documents merged after the presets (a chained run's init step that copies its base model in).
    """
    spec = recipe.spec
    presets = choice.presets
    preset_names = [preset.name for preset in presets]
    # The user's keys, types and bounds are checked before anything reads the disk.
    command_line = coerce_overrides(recipe, component, cmd.overrides, written=cmd.written)
    warnings: list[str] = []
    source = f"recipe {recipe.file}"
    params: dict[str, Any] = {}
    provenance: dict[str, str] = {}

    def put(name: str, value: Any, origin: str) -> None:
        if name in component.inputs:
            if component.inputs[name].type == "float" and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            params[name] = value
            provenance[name] = origin

    for name, value in component.defaults().items():
        put(name, value, "component default")

    pins, unpinned = pinner.pin(recipe, component, put, warnings, require_local)
    if recipe.axolotl_text is not None:
        put("config", recipe.axolotl_text, f"recipe {recipe.spec.axolotl_config} (verbatim)")
    for name, value in spec.defaults.items():
        put(name, value, source)
    for preset in presets:
        for name, param in preset.params.items():
            put(name, param.get("value") if isinstance(param, dict) else param, f"preset {preset.name}")
    for name, value in command_line.items():
        put(name, value, "command line")
    # Values the catalog computes for this operation (a preflight's world size and memory budget).
    for name, (value, origin) in (derived or {}).items():
        put(name, value, origin)

    comparable = not unpinned
    if unpinned and not spec.exploration:
        raise PlanError(
            f"recipe {recipe.name} is not pinned: {'; '.join(unpinned)}. Pin them in {recipe.file}, "
            "or set `exploration: true` there to allow non-comparable runs"
        )
    if unpinned:
        warnings.append("non-comparable (exploration): " + "; ".join(unpinned))

    contract, contract_hash = pinner.eval_contract(recipe, pins, put)
    put("recipe_name", recipe.name, source)
    put("recipe_hash", recipe.hash, f"computed: sha256 of {recipe.file}")
    missing = component.unset(params)
    if missing:
        raise PlanError(f"recipe {recipe.name} leaves required inputs of {component.name} unset: {', '.join(missing)}")

    try:
        operation = compile_operation(component.document, [*(p.document for p in presets), *patches], params)
    except OperationSpecError as exc:
        raise PlanError(f"{recipe.name} with presets {', '.join(preset_names) or '(none)'}: {exc}") from exc
    resources = summarize_resources(operation, component.run_kind, presets)
    provenance.update(cluster_provenance(presets))
    warnings.extend(resource_warnings(component, resources, params, preset_names))
    warnings.extend(replacement_warnings(choice, resources))
    memory = estimate_run_memory(recipe, component, params, resources, pinner.repo_root)
    tags = [f"recipe:{recipe.name}", *[f"preset:{name}" for name in preset_names]]
    tags.append("comparable" if comparable else "non-comparable")
    return Plan(
        recipe=recipe.name,
        recipe_file=recipe.file,
        recipe_hash=recipe.hash,
        component=component.name,
        operation=operation,
        params=params,
        provenance=provenance,
        presets=preset_names,
        preset_sources=choice.sources,
        replaced_presets=[(default.name, user.name) for default, user in choice.replaced],
        pins=pins,
        comparable=comparable,
        unpinned=unpinned,
        eval_contract=contract,
        eval_contract_hash=contract_hash,
        resources=resources,
        warnings=warnings,
        memory=memory,
        tags=tags,
        dry_run=cmd.dry_run,
        policy=run_policy(
            retry=spec.retry,
            max_pending=spec.max_pending,
            notify=spec.notify,
            preset_max_pending=[(p.name, p.max_pending) for p in presets if p.max_pending is not None],
        )
        | health_policy(component, spec.alerts),
    )
