"""The smoke-first gate: a distributed run waits for a passed preflight of the same recipe, pins and presets.

Pure decisions. The run service looks up the stored preflight by `gate_key` and asks `check_gate`; what a
preflight is compiled from is `bot.catalog.preflight`. A changed pin (image, model, data, code revision),
another preset or a param the memory estimate depends on gives another key, so it needs a new preflight.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from bot.catalog.plan import Plan

# The params a preflight's memory and recovery evidence depends on: changing one needs a new preflight.
MEMORY_PARAMS = (
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "max_length",
    "gradient_checkpointing",
    "dtype",
    "bf16",
    "use_peft",
    "lora_r",
    "lora_target_modules",
    "nproc_per_node",
)
# What DPO, KTO, GRPO and RLOO hold besides the policy (a reference model, generations, vLLM's share): keys in the
# gate key only when a run has them, so an SFT run's key is what it was.
TRAINER_MEMORY_PARAMS = (
    "beta",
    "precompute_ref_log_probs",
    "num_generations",
    "max_completion_length",
    "use_vllm",
    "vllm_mode",
    "vllm_gpu_memory_utilization",
)

WHAT_A_PREFLIGHT_CHECKS = (
    "memory (the estimate against the preset, the measured peak against the estimate), communication "
    "(an all-reduce across every worker), checkpoint recovery (kill the workers after a checkpoint, resume, "
    "the same losses) and that the launcher really distributes"
)


def gate_key(recipe: str, pins: dict[str, Any], presets: list[str], params: dict[str, Any]) -> str:
    """`sha256:<hex>` over what a preflight validates: recipe, pins, presets (in order) and memory params."""
    payload = {
        "recipe": recipe,
        "pins": pins,
        "presets": presets,
        "params": {
            **{name: params.get(name) for name in MEMORY_PARAMS},
            **{name: params[name] for name in TRAINER_MEMORY_PARAMS if name in params},
        },
    }
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def processes_per_replica(resources: dict[str, Any], params: dict[str, Any]) -> int:
    """How many processes torchrun starts in each replica: `nproc_per_node` when a number, else its GPUs."""
    nproc = str(params.get("nproc_per_node", "gpu")).strip()
    if nproc.isdigit() and int(nproc) > 0:
        return int(nproc)
    return max(1, int(resources.get("gpus_per_replica") or 0))


def expected_world_size(resources: dict[str, Any], params: dict[str, Any]) -> int:
    """The ranks the presets start: replicas x processes per replica (1 for a single-process job)."""
    if resources.get("run_kind") != "pytorchjob":
        return 1
    return max(1, int(resources.get("replicas") or 1)) * processes_per_replica(resources, params)


@dataclass(frozen=True)
class PassedPreflight:
    """What the gate needs to know of a passed preflight (read from storage by the run service)."""

    run_name: str
    finished_at: str
    wall_s: float | None = None
    world_size: int | None = None
    lines: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class GateVerdict:
    """May this plan be submitted, and how it is shown: validated, unvalidated (skipped) or refused."""

    allowed: bool
    validation: dict[str, Any] | None = None
    refusal: str | None = None


def preflight_command(plan: Plan, overrides: dict[str, Any], written: dict[str, str]) -> str:
    """The copy-pasteable `/finetune preflight` of this plan: same recipe, presets and overrides."""
    parts = [f"/finetune preflight recipe={plan.recipe}"]
    if plan.presets:
        parts.append("preset=" + ",".join(plan.presets))
    for key, value in overrides.items():
        shown = written.get(key, str(value).lower() if isinstance(value, bool) else str(value))
        parts.append(f"{key}={shown}")
    return " ".join(parts)


def check_gate(
    plan: Plan,
    passed: PassedPreflight | None,
    *,
    skip: bool,
    skipper: str | None,
    command: str,
    lost_preflight: str | None = None,
) -> GateVerdict:
    """The gate's verdict for a plan: single-process runs pass; distributed ones need `passed` or `skip`.

    `skip` is `--skip-preflight`: never allowed here, it holds the run for approval (the caller has already
    refused it from a non-approver). `command` is the preflight to run first (`preflight_command`), quoted in
    the refusal; `lost_preflight` names a preflight that passed but whose run Polyaxon no longer has (said why).
    """
    if not plan.distributed:
        return GateVerdict(allowed=True)
    if passed is not None:
        return GateVerdict(
            allowed=True,
            validation={
                "state": "validated",
                "preflight": passed.run_name,
                "passed_at": passed.finished_at,
                "wall_s": passed.wall_s,
                "world_size": passed.world_size,
                "lines": passed.lines,
            },
        )
    if skip:
        # Skipping is an approval like any other (bot.registry.skip): the run is held until approvers agree.
        return GateVerdict(
            allowed=False,
            validation={"state": "awaiting_approval", "requested_by": skipper, "command": command},
            refusal=f"skipping the preflight of {plan.recipe} needs the approval of other approvers",
        )
    passed_none = (
        f"the preflight `{lost_preflight}` of these pins and presets passed, but Polyaxon no longer has its run "
        "(lost: deleted there, or the server was replaced), so it is no evidence any more"
        if lost_preflight
        else "no preflight of these pins and presets has passed"
    )
    return GateVerdict(
        allowed=False,
        validation={"state": "needs_preflight", "command": command},
        refusal=(
            f"{plan.recipe} is distributed ({plan.expected_world_size} ranks on "
            f"{', '.join(plan.presets) or 'its presets'}) and {passed_none}. "
            f"Run first:\n`{command}`\nIt checks {WHAT_A_PREFLIGHT_CHECKS}, in a few short steps. "
            "An approver may ask to skip it with `--skip-preflight`: the run is then held until other approvers "
            "approve it (audited), and shows as unvalidated."
        ),
    )
