"""What the merged presets ask of the cluster: resources, replicas, placement, and which preset set each field.

Also the warnings about a misfit between the presets and the training (GPUs on a single-process
component, bf16 without a GPU, float32 on a GPU).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from typing import Any

from bot.catalog.manifests import TRL_COMPONENTS, Component, Preset
from bot.catalog.presets import PresetChoice

GPU_RESOURCE = "nvidia.com/gpu"
GPU_MEMORY_ANNOTATION = "finetune.io/gpu-memory-gib"

_QUANTITY_RE = re.compile(r"^([0-9.]+)([KMGTPE]i?|[kmgtpe])?$")
_QUANTITY_FACTORS = {
    None: 1,
    "Ki": 1024,
    "Mi": 1024**2,
    "Gi": 1024**3,
    "Ti": 1024**4,
    "K": 1000,
    "k": 1000,
    "M": 1000**2,
    "G": 1000**3,
    "T": 1000**4,
}


def quantity_bytes(value: Any) -> int | None:
    """Bytes of a Kubernetes memory quantity (`4Gi`, `512Mi`, `1000000`), or None."""
    match = _QUANTITY_RE.match(str(value))
    if not match or match.group(2) not in _QUANTITY_FACTORS:
        return None
    return int(float(match.group(1)) * _QUANTITY_FACTORS[match.group(2)])


def _replica_summary(patch: Mapping[str, Any]) -> dict[str, Any]:
    container = patch.get("container") or {}
    environment = patch.get("environment") or {}
    resources = container.get("resources") or {}
    limits = resources.get("limits") or {}
    requests = resources.get("requests") or {}
    gpus = limits.get(GPU_RESOURCE, requests.get(GPU_RESOURCE, 0))
    return {
        "requests": requests,
        "limits": limits,
        "gpus": int(gpus or 0),
        "node_selector": environment.get("nodeSelector") or {},
        "tolerations": environment.get("tolerations") or [],
        "gpu_memory_gib": (environment.get("annotations") or {}).get(GPU_MEMORY_ANNOTATION),
    }


def summarize_resources(operation: Mapping[str, Any], run_kind: str, presets: list[Preset]) -> dict[str, Any]:
    """What the merged presets ask of the cluster: queue, replicas, GPUs, requests/limits, placement."""
    patch = operation.get("runPatch") or {}
    summary: dict[str, Any] = {"run_kind": run_kind, "queue": operation.get("queue")}
    if run_kind == "pytorchjob":
        run = (operation.get("component") or {}).get("run") or {}
        replicas = {}
        for role in ("master", "worker"):
            merged = {**(run.get(role) or {}), **(patch.get(role) or {})}
            replicas[role] = {"replicas": int(merged.get("replicas") or 0), **_replica_summary(patch.get(role) or {})}
        first = replicas["master"]
        summary.update(
            {
                "replicas": sum(r["replicas"] for r in replicas.values()),
                "replica_specs": replicas,
                "gpus_per_replica": first["gpus"],
                "gpus_total": sum(r["replicas"] * r["gpus"] for r in replicas.values()),
            }
        )
        details = first
    else:
        details = _replica_summary(patch)
        summary.update({"replicas": 1, "gpus_per_replica": details["gpus"], "gpus_total": details["gpus"]})
    summary.update(
        {
            "requests": details["requests"],
            "limits": details["limits"],
            "node_selector": details["node_selector"],
            "tolerations": details["tolerations"],
            "gpu_memory_gib": details["gpu_memory_gib"],
            "memory_limit_bytes": quantity_bytes(details["limits"].get("memory"))
            if details["limits"].get("memory")
            else None,
            "max_retries": (operation.get("termination") or {}).get("maxRetries"),
        }
    )
    memory_sources = [p.name for p in presets if GPU_MEMORY_ANNOTATION in json.dumps(p.document)]
    summary["gpu_memory_source"] = memory_sources[-1] if memory_sources else None
    return summary


_PROVENANCE_LEAVES = frozenset(
    {"resources", "nodeSelector", "tolerations", "affinity", "annotations", "labels", "replicas"}
)


def _cluster_fields(node: Any, prefix: str) -> Iterator[str]:
    if not isinstance(node, dict):
        yield prefix
        return
    for key, value in node.items():
        path = f"{prefix}.{key}" if prefix else str(key)
        if key in _PROVENANCE_LEAVES or not isinstance(value, dict):
            yield path
        else:
            yield from _cluster_fields(value, path)


def cluster_provenance(presets: list[Preset]) -> dict[str, str]:
    """Cluster field (`runPatch.container.resources`, `queue`, ...) -> the presets that set it, in order."""
    origin: dict[str, list[str]] = {}
    for preset in presets:
        for key in ("queue", "termination", "runPatch", "namespace"):
            if key in preset.document:
                for field in _cluster_fields(preset.document[key], key):
                    origin.setdefault(field, []).append(f"preset {preset.name}")
    return {field: ", ".join(names) for field, names in origin.items()}


def resource_warnings(
    component: Component, resources: Mapping[str, Any], params: Mapping[str, Any], preset_names: list[str]
) -> list[str]:
    """Where the presets do not suit the training: GPUs on a `job` component, bf16 on a CPU, float32 on a GPU."""
    warnings = []
    gpus = int(resources.get("gpus_per_replica") or 0)
    if component.run_kind == "job" and gpus > 1:
        warnings.append(
            f"presets {', '.join(preset_names)} ask for {gpus} GPUs on {component.name}, a single-process `job` "
            "component: adding GPU requests alone does not distribute a single-process training script — "
            "use trl-sft-distributed"
        )
    if gpus == 0 and params.get("bf16") is True:
        warnings.append("bf16=true on a CPU-only preset: bf16 training needs a GPU here; set bf16=false")
    if gpus and component.name in TRL_COMPONENTS and params.get("dtype") == "float32" and not params.get("bf16"):
        warnings.append("training in float32 on a GPU: bf16=true with dtype=bfloat16 halves memory and is faster")
    return warnings


def replacement_warnings(choice: PresetChoice, resources: Mapping[str, Any]) -> list[str]:
    """What the user's presets replaced: said always, and loudly when the run loses its accelerators."""
    warnings = []
    gpus_now = int(resources.get("gpus_total") or 0)
    for default, user in choice.replaced:
        if default.family == "resources":
            gpus_before = preset_gpus(default, str(resources.get("run_kind") or "job"))
            if gpus_before and not gpus_now:
                warnings.append(
                    f"preset {user.name} replaces the recipe's {default.name} ({gpus_before} GPU"
                    f"{'s' if gpus_before > 1 else ''}): this run gets NO GPU"
                )
                continue
        warnings.append(f"preset {user.name} replaces the recipe's {default.name} ({default.family})")
    return warnings


def preset_gpus(preset: Preset, run_kind: str) -> int:
    """GPUs per replica that a resources preset asks for on its own."""
    operation = {"runPatch": preset.document.get("runPatch") or {}}
    return int(summarize_resources(operation, run_kind, [preset]).get("gpus_per_replica") or 0)
