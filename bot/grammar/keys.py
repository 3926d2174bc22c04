"""The keys a user may not set from the command line: cluster settings (presets' business) and pinned ones."""

from __future__ import annotations

import re

# Settings that belong to the platform team's presets, never to a training override. Compared
# after lower-casing and dropping `_`/`-`, so `node_selector`, `nodeSelector` and `node-selector`
# are one key.
CLUSTER_KEYS: frozenset[str] = frozenset(
    {
        "nodeselector",
        "node",
        "nodes",
        "nodename",
        "tolerations",
        "toleration",
        "affinity",
        "gpus",
        "gpu",
        "numgpus",
        "ngpus",
        "gpucount",
        "accelerator",
        "accelerators",
        "resources",
        "resource",
        "requests",
        "limits",
        "cpu",
        "cpus",
        "memory",
        "mem",
        "shm",
        "queue",
        "namespace",
        "replicas",
        "workers",
        "numnodes",
        "nnodes",
        "spot",
        "preemptible",
        "priority",
        "priorityclassname",
        "serviceaccount",
        "serviceaccountname",
        "connections",
        "environment",
        "runpatch",
        "labels",
        "annotations",
        "instancetype",
        "machinetype",
        "hostnetwork",
    }
)

# Pinned by the recipe, so a user cannot swap them from the command line; `resume_from` is set only by
# `/finetune resume`, which picks a complete checkpoint of a finished run and links the two runs.
PINNED_KEYS: frozenset[str] = frozenset(
    {
        "image",
        "imagedigest",
        "coderevision",
        "modelrevision",
        "datasetrevision",
        "datasetdigest",
        "component",
        "resumefrom",
    }
)


def normalize_key(key: str) -> str:
    """A key folded for comparison with the cluster and pinned key lists."""
    return re.sub(r"[_\-.]", "", key.lower())


def cluster_key_hint(key: str, value: str) -> str:
    """The preset to try instead of a cluster setting given on the command line."""
    folded = normalize_key(key.split(".", 1)[0])
    if folded in {"gpus", "gpu", "numgpus", "ngpus", "gpucount", "accelerator", "accelerators"}:
        return "preset=gpu-1x" if value.strip() == "1" else "preset=gpu-8x"
    if folded in {"spot", "preemptible", "tolerations", "toleration"}:
        return "preset=spot"
    if folded in {"cpu", "cpus", "memory", "mem"}:
        return "preset=cpu-small"
    return "one from /finetune presets"


def pinned_key_message(key: str) -> str:
    """Why `run` refuses a pinned key, and what to do instead."""
    if normalize_key(key) == "resumefrom":
        return (
            f"{key} is set only by `/finetune resume RUN [checkpoint=latest|step-N]`, which continues a run "
            "from one of its checkpoints; `run` cannot set it"
        )
    return f"{key} is pinned by the recipe and cannot be overridden; choose another recipe"


def is_cluster_key(key: str) -> bool:
    """True when `key` (or its first dotted part) is a cluster setting."""
    return normalize_key(key.split(".", 1)[0]) in CLUSTER_KEYS
