"""Compiling a preflight: the short validation operation of a distributed recipe, with the run's pins and presets.

The preflight component (`recipe.preflight.component`) takes the trainer's inputs plus its own
(`expected_world_size`, `nnodes`, `preflight_steps`, `comm_timeout_s`, `memory_estimate_bytes`,
`memory_limit_bytes`), which the catalog derives from the run's plan. A pytorchjob preflight gets the presets
as they are (the preset's replicas, each running `python -m trainer.preflight`); a job preflight (where only
jobs run, as on the local stack) gets the master replica's settings lifted to the job, and starts every
replica's processes from one node: with one replica that is exactly the cluster's world, with more the
rendezvous waits for nodes that never come and the communication line fails, which is the truth there.
"""

from __future__ import annotations

from typing import Any

from bot.catalog.errors import PlanError
from bot.catalog.gate import expected_world_size, gate_key, processes_per_replica
from bot.catalog.manifests import Component, PreflightSpec, Preset, Recipe
from bot.catalog.pins import Pinner
from bot.catalog.plan import Plan, compile_plan
from bot.catalog.presets import PresetChoice
from bot.grammar import RunCommand

PREFLIGHT_INPUTS = (
    "expected_world_size",
    "nnodes",
    "preflight_steps",
    "comm_timeout_s",
    "memory_estimate_bytes",
    "memory_limit_bytes",
)


def mark_distributed(plan: Plan) -> Plan:
    """Fill a run plan's gate fields: distributed, its gate key and the ranks its presets start."""
    plan.distributed = plan.resources.get("run_kind") == "pytorchjob"
    plan.expected_world_size = expected_world_size(plan.resources, plan.params)
    plan.gate_key = gate_key(plan.recipe, plan.pins, plan.presets, plan.params) if plan.distributed else ""
    return plan


def lift_to_job(preset: Preset, role: str = "master") -> Preset:
    """A pytorchjob preset as a job preset: the `role` replica's environment and container at the job's level."""
    if preset.target_kind != "pytorchjob":
        return preset
    document = dict(preset.document)
    patch = dict(document.get("runPatch") or {})
    replica = dict(patch.get(role) or {})
    replica.pop("replicas", None)
    document["runPatch"] = replica
    return preset.model_copy(update={"document": document, "target_kind": "job"})


def compile_preflight(
    cmd: RunCommand,
    run_plan: Plan,
    recipe: Recipe,
    checker: Component,
    choice: PresetChoice,
    pinner: Pinner,
    *,
    require_local: bool = True,
) -> Plan:
    """Compile the preflight of `run_plan` (already compiled and marked) with the `checker` component."""
    if not run_plan.distributed:
        raise PlanError(
            f"{recipe.name} runs as one process ({run_plan.resources.get('run_kind', 'job')}): a preflight "
            f"validates distributed recipes only. Check it with one short run instead: "
            f"`/finetune run recipe={recipe.name} max_steps=20`, then `/finetune outputs RUN`",
        )
    missing = [name for name in PREFLIGHT_INPUTS if name not in checker.inputs]
    if missing:
        raise PlanError(f"component {checker.name} is not a preflight: it lacks inputs {', '.join(missing)}")
    spec = recipe.spec.preflight or PreflightSpec()
    if checker.run_kind == "job":
        choice = PresetChoice(
            presets=[lift_to_job(preset) for preset in choice.presets],
            sources=choice.sources,
            replaced=choice.replaced,
        )
    replicas = max(1, int(run_plan.resources.get("replicas") or 1))
    memory = run_plan.memory
    origin = f"preflight of {', '.join(run_plan.presets) or 'the recipe'}"
    derived: dict[str, tuple[Any, str]] = {
        "expected_world_size": (run_plan.expected_world_size, f"{origin}: replicas x processes"),
        "nnodes": (replicas, f"{origin}: replicas"),
        "nproc_per_node": (
            str(processes_per_replica(run_plan.resources, run_plan.params)),
            f"{origin}: processes per replica",
        ),
        "preflight_steps": (spec.steps, f"recipe {recipe.file} preflight.steps"),
        "comm_timeout_s": (spec.comm_timeout_s, f"recipe {recipe.file} preflight.comm_timeout_s"),
        "memory_estimate_bytes": (memory.total_bytes if memory else 0, "memory estimate (per device)"),
        "memory_limit_bytes": (
            memory.budget_bytes if memory and memory.budget_bytes else 0,
            f"presets' memory per device ({memory.budget_source})" if memory and memory.budget_source else "unknown",
        ),
    }
    plan = compile_plan(cmd, recipe, checker, choice, pinner, require_local=require_local, derived=derived)
    plan.kind = "preflight"
    plan.distributed = True
    plan.gate_key = run_plan.gate_key
    plan.expected_world_size = run_plan.expected_world_size
    # The preflight is judged against the run's estimate, not its own (its component differs).
    plan.memory = run_plan.memory
    plan.fitting_presets = run_plan.fitting_presets
    plan.tags = [tag for tag in plan.tags if not tag.startswith("comparable")] + ["preflight"]
    return plan
