"""Preflight memory estimate: parameter counts of known architectures and the budget comparison, and in a plan."""

from __future__ import annotations

import pytest

from bot.catalog import Catalog
from bot.catalog.memory import (
    GIB,
    ModelConfigError,
    ModelShape,
    estimate_training_memory,
    lora_parameter_count,
    shape_from_config,
)
from tests.bot.catalog.planning import plan

QWEN_05B = ModelShape(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
    tie_word_embeddings=True,
    torch_dtype="bfloat16",
)
LLAMA_8B = ModelShape(
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    vocab_size=128256,
    torch_dtype="bfloat16",
)


@pytest.mark.parametrize(
    ("shape", "published"),
    [(QWEN_05B, 494_032_768), (LLAMA_8B, 8_030_261_248)],
    ids=["qwen2.5-0.5b", "llama-3.1-8b"],
)
def test_parameter_count_matches_published_sizes(shape: ModelShape, published: int) -> None:
    # Published counts include Qwen's attention biases (~27k), which the estimate leaves out.
    assert abs(shape.parameter_count() - published) / published < 0.001


def test_lora_parameter_count() -> None:
    # Llama-3.1-8B, r=16 on all linear layers: 41.9M, the figure PEFT prints for this setup.
    assert lora_parameter_count(LLAMA_8B, 16, "all-linear") == 41_943_040
    assert lora_parameter_count(LLAMA_8B, 16, "q_proj,v_proj") == 32 * 16 * ((4096 + 4096) + (4096 + 1024))


def test_full_fine_tune_of_8b_does_not_fit_one_80gb_gpu() -> None:
    estimate = estimate_training_memory(
        LLAMA_8B,
        dtype="bfloat16",
        use_peft=False,
        batch_size=4,
        seq_len=4096,
        gradient_checkpointing=True,
        mixed_precision=True,
        budget_bytes=80 * GIB,
        budget_source="GPU memory of gpu-1x",
    )
    assert estimate.fits is False
    assert estimate.weights_bytes == estimate.parameters * 2
    assert estimate.optimizer_bytes == 2 * estimate.gradients_bytes
    assert "OVER BUDGET" in estimate.summary() and "vs 80 GiB" in estimate.summary()


def test_lora_of_8b_fits_and_is_smaller() -> None:
    common = {"dtype": "bfloat16", "batch_size": 4, "seq_len": 4096, "gradient_checkpointing": True}
    lora = estimate_training_memory(LLAMA_8B, use_peft=True, budget_bytes=80 * GIB, **common)  # type: ignore[arg-type]
    full = estimate_training_memory(LLAMA_8B, use_peft=False, **common)  # type: ignore[arg-type]
    assert lora.fits is True and lora.total_bytes < full.total_bytes / 2
    assert lora.trainable_parameters == 41_943_040


def test_activations_grow_with_tokens_and_checkpointing_helps() -> None:
    def total(batch: int, checkpointing: bool) -> int:
        return estimate_training_memory(
            QWEN_05B,
            dtype="bfloat16",
            use_peft=True,
            batch_size=batch,
            seq_len=2048,
            gradient_checkpointing=checkpointing,
        ).activations_bytes

    assert total(8, False) > total(4, False) > total(4, True)


def test_auto_dtype_follows_the_checkpoint() -> None:
    estimate = estimate_training_memory(QWEN_05B, dtype="auto", use_peft=False, batch_size=1, seq_len=128)
    assert estimate.dtype == "bfloat16"
    with pytest.raises(ModelConfigError):
        estimate_training_memory(QWEN_05B, dtype="int3", use_peft=False, batch_size=1, seq_len=128)


def test_cpu_estimate_without_budget() -> None:
    estimate = estimate_training_memory(
        QWEN_05B, dtype="float32", use_peft=False, batch_size=1, seq_len=128, device="cpu"
    )
    assert estimate.fits is None and estimate.device == "cpu" and "CPU" in estimate.summary()


def test_shape_from_config() -> None:
    shape = shape_from_config({**QWEN_05B.model_dump(), "num_key_value_heads": None})
    assert shape.num_key_value_heads == 14  # defaults to the attention heads (no GQA)
    with pytest.raises(ModelConfigError, match="hidden_size"):
        shape_from_config({"vocab_size": 10})


@pytest.mark.parametrize(
    ("optim", "per_parameter"),
    [("adamw_torch", 4.0), ("adamw_torch_fused", 4.0), ("adamw_8bit", 2.0), ("adamw_torch_4bit", 1.0), ("sgd", 0.0)],
    ids=["adamw", "adamw-fused", "adamw-8bit", "adamw-4bit", "sgd"],
)
def test_optimizer_state_by_optim(optim: str, per_parameter: float) -> None:
    estimate = estimate_training_memory(
        LLAMA_8B, dtype="bfloat16", use_peft=False, batch_size=1, seq_len=128, optim=optim
    )
    assert estimate.optimizer_bytes == int(estimate.parameters * per_parameter)


def test_memory_over_budget_is_in_the_plan(catalog: Catalog) -> None:
    lora = plan(catalog, "run recipe=sft-llama31-8b-lora")
    assert lora.memory is not None and lora.memory.fits is True
    full = plan(catalog, "run recipe=sft-llama31-8b-lora use_peft=false")
    assert full.memory is not None and full.memory.fits is False
    # Over budget is a verdict, not a warning: the run is refused (unless forced), with the presets it fits on.
    assert full.over_memory_budget and not lora.over_memory_budget
    summary = full.memory.summary()
    assert "OVER BUDGET" in summary and "vs 80 GiB" in summary and "8,030.3M params" in summary
    assert full.fitting_presets == []  # a full fine-tune of 8B fits no shipped preset
    small = plan(catalog, "run recipe=sft-tiny batch_size=64 max_length=1024")
    assert small.over_memory_budget and small.fitting_presets == ["cpu-large", "gpu-1x", "gpu-8x"]
    tiny = plan(catalog, "run recipe=sft-tiny")
    assert tiny.memory is not None and tiny.memory.device == "cpu" and tiny.memory.fits is True
