"""What the presets ask of the cluster, and the warnings when it does not suit the training."""

from __future__ import annotations

from bot.catalog import Catalog
from tests.bot.catalog.planning import plan


def test_several_gpus_on_a_job_component_warn(catalog: Catalog) -> None:
    result = plan(catalog, "run recipe=sft-qwen-0p5b-lora preset=gpu-8x")
    assert any(
        "adding GPU requests alone does not distribute a single-process training script — use trl-sft-distributed" in w
        for w in result.warnings
    )
    assert not any("distribute" in w for w in plan(catalog, "run recipe=sft-qwen-0p5b-lora").warnings)


def test_distributed_plan_resources(catalog: Catalog) -> None:
    result = plan(catalog, "run recipe=sft-qwen-1p5b-ddp")
    assert result.resources["run_kind"] == "pytorchjob"
    assert result.resources["replicas"] == 2 and result.resources["gpus_total"] == 16
    assert result.memory is not None and result.memory.fits is True
