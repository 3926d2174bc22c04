"""Presets: the recipe's defaults, and presets stacking in order."""

from __future__ import annotations

import pytest

from bot.catalog import Catalog, PlanError
from tests.bot.catalog.planning import plan


def test_default_presets_come_from_the_recipe(catalog: Catalog) -> None:
    assert plan(catalog, "run recipe=sft-tiny").presets == ["cpu-small"]
    assert plan(catalog, "run recipe=sft-tiny preset=gpu-1x").presets == ["gpu-1x"]


def test_presets_stack_in_order(catalog: Catalog) -> None:
    result = plan(catalog, "run recipe=sft-qwen-0p5b-lora preset=gpu-1x,spot")
    assert result.resources["node_selector"] == {
        "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
        "cloud.google.com/gke-spot": "true",
    }
    assert [t["key"] for t in result.resources["tolerations"]] == ["nvidia.com/gpu", "cloud.google.com/gke-spot"]
    assert result.resources["max_retries"] == 3 and result.resources["queue"] == "gpu"
    assert result.provenance["runPatch.environment.tolerations"] == "preset gpu-1x, preset spot"
    assert result.provenance["termination.maxRetries"] == "preset spot"
    # Two presets of one family do not stack: the later one would silently win, so both are named instead.
    with pytest.raises(PlanError, match="presets gpu-1x and gpu-8x both set resources") as refused:
        plan(catalog, "run recipe=sft-qwen-0p5b-lora preset=gpu-1x,gpu-8x")
    assert refused.value.suggestions == ["gpu-1x", "gpu-8x"]
