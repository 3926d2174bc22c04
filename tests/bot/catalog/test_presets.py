"""Presets: the recipe's defaults, and presets stacking in order."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.catalog import Catalog, CatalogError, PlanError
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
    # The suggestions are whole values that plan, not the two names given (issue 33 G).
    assert refused.value.suggestions == ["preset=gpu-1x", "preset=gpu-8x"]
    assert "try `preset=gpu-1x` or `preset=gpu-8x`" in refused.value.message


def test_each_shipped_preset_has_a_family(catalog: Catalog) -> None:
    families = {name: preset.family for name, preset in catalog.presets.items()}
    assert families == {
        "cpu-large": "resources",
        "cpu-small": "resources",
        "ddp-2x8": "resources",
        "ddp-cpu-2": "resources",
        "gpu-1x": "resources",
        "gpu-8x": "resources",
        "s3-checkpoints": "storage",
        "spot": "placement",
        "vllm-colocate": "generation",
        "vllm-server": "generation",
    }


def test_a_users_preset_replaces_only_the_default_of_its_family(catalog: Catalog) -> None:
    spot = plan(catalog, "run recipe=sft-llama31-8b-lora preset=spot")
    assert spot.presets == ["gpu-1x", "spot"] and spot.resources["gpus_total"] == 1
    assert spot.preset_sources == {"gpu-1x": "recipe default", "spot": "command line"}
    cpu = plan(catalog, "run recipe=sft-llama31-8b-lora preset=cpu-small,s3-checkpoints")
    assert cpu.presets == ["cpu-small", "s3-checkpoints"] and cpu.replaced_presets == [("gpu-1x", "cpu-small")]
    assert any("NO GPU" in w for w in cpu.warnings)
    same = plan(catalog, "run recipe=sft-tiny preset=cpu-small")
    assert same.replaced_presets == [] and not any("replaces" in w for w in same.warnings)


def test_a_recipe_may_not_default_to_two_presets_of_one_family(fresh_dir: Path) -> None:
    recipe = fresh_dir / "recipes" / "sft-tiny.yaml"
    recipe.write_text(
        recipe.read_text(encoding="utf-8").replace("presets: [cpu-small]", "presets: [cpu-small, gpu-1x]")
    )
    with pytest.raises(CatalogError, match="cpu-small and gpu-1x both set resources"):
        Catalog.load(fresh_dir)


def test_a_preset_may_name_its_family_and_an_unknown_one_is_refused(fresh_dir: Path) -> None:
    preset = fresh_dir / "presets" / "spot.yaml"
    preset.write_text(preset.read_text(encoding="utf-8") + "family: placements\n")
    with pytest.raises(CatalogError, match="'placements' is not a preset family"):
        Catalog.load(fresh_dir)
