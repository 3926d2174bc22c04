"""Preflight estimate of training memory per device, from a model's config and the training knobs.

Pure arithmetic, no torch. The estimate is deliberately simple and conservative (it is a guard
against obvious misfits such as a full fine-tune of an 8B model on one 80 GB GPU, not a profiler):

- weights: every parameter in the load dtype (LoRA: the frozen base in the load dtype, plus the
  adapter in float32);
- gradients: one per trainable parameter, in the trainable parameters' dtype;
- optimizer: AdamW (the Trainer's default) keeps two states per trainable parameter, in the
  trainable parameters' dtype; 8-bit variants one byte per state, 4-bit half that; Lion, RMSprop
  and Adagrad one state; SGD (no momentum) and Adafactor (factored) about none;
- activations: per layer and token, `34 * hidden` bytes at 16 bits with SDPA/flash attention
  (Korthikanti et al. 2022, without the attention-score term), with the MLP part scaled by
  `intermediate / (4 * hidden)`, doubled at 32 bits; with gradient checkpointing only each
  layer's input is kept, plus one layer's full activations;
- logits: `batch * seq * vocab` in float32, twice (values and gradient);
- DDP keeps a flat copy of the gradients for its all-reduce buckets;
- per trainer (`bot.catalog.trainers`): DPO, KTO and reward models run two sequences per example (chosen and
  rejected; KTO's completion and its KL pair), so twice the activations and logits; DPO and KTO hold a frozen
  reference copy of the weights unless LoRA (the disabled adapter) or precomputed reference log-probs stand in,
  GRPO and RLOO hold one when `beta` > 0 without LoRA; GRPO and RLOO generate `per_device_train_batch_size`
  completions of `max_completion_length` tokens after a prompt (taken as `PROMPT_TOKENS`), whose KV cache
  (`2 * layers * kv_dim` per token) is held while generating; vLLM colocated with training reserves its
  `vllm_gpu_memory_utilization` share of the GPU;
- overhead: 1 GiB for the CUDA context and allocator plus 10 % fragmentation on a GPU, 0.5 GiB
  for the interpreter and libraries on a CPU.

`estimate_run_memory` is the catalog's glue: it reads the model's config (the recipe's `model.config`
or the local model's `config.json`), the run's params and the presets' memory budget.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from bot.catalog.manifests import TRL_COMPONENTS, Component, Recipe
from bot.catalog.trainers import component_trainer, holds_reference

GIB = 1024**3
PROMPT_TOKENS = 256  # GRPO/RLOO prompts' length assumed by the estimate (TRL 1.x bounds only the completions)
DTYPE_BYTES: dict[str, int] = {"float32": 4, "float16": 2, "bfloat16": 2}
LINEAR_MODULES: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


class ModelConfigError(ValueError):
    """The model config lacks what the estimate needs."""


class ModelShape(BaseModel):
    """The architecture numbers of a decoder-only transformer (Llama/Qwen/Mistral family)."""

    model_config = ConfigDict(frozen=True)

    hidden_size: int
    intermediate_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    vocab_size: int
    tie_word_embeddings: bool = False
    torch_dtype: str | None = None

    @property
    def kv_dim(self) -> int:
        """Width of the key and value projections (grouped-query attention)."""
        return self.hidden_size // self.num_attention_heads * self.num_key_value_heads

    def linear_shapes(self) -> dict[str, tuple[int, int]]:
        """(in, out) of each linear module of one layer."""
        h, i, kv = self.hidden_size, self.intermediate_size, self.kv_dim
        return {
            "q_proj": (h, h),
            "k_proj": (h, kv),
            "v_proj": (h, kv),
            "o_proj": (h, h),
            "gate_proj": (h, i),
            "up_proj": (h, i),
            "down_proj": (i, h),
        }

    def parameter_count(self) -> int:
        """Total parameters (embeddings, layers, final norm, LM head unless tied)."""
        per_layer = sum(a * b for a, b in self.linear_shapes().values()) + 2 * self.hidden_size
        embeddings = self.vocab_size * self.hidden_size
        head = 0 if self.tie_word_embeddings else embeddings
        return embeddings + head + self.num_hidden_layers * per_layer + self.hidden_size


class MemoryEstimate(BaseModel):
    """Estimated bytes per device, by part, and the comparison with the device's memory."""

    device: str  # "gpu" or "cpu"
    parameters: int
    trainable_parameters: int
    dtype: str
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    overhead_bytes: int
    total_bytes: int
    reference_bytes: int = 0  # a frozen reference model (DPO, KTO; GRPO and RLOO with beta > 0)
    generation_bytes: int = 0  # GRPO/RLOO: the KV cache of generated completions, and vLLM's reserved share
    budget_bytes: int | None = None
    budget_source: str | None = None
    fits: bool | None = None

    @property
    def total_gib(self) -> float:
        """Total estimate in GiB."""
        return self.total_bytes / GIB

    def summary(self) -> str:
        """One line with the figures, e.g. for the dry-run plan."""
        parts = (
            f"weights {self.weights_bytes / GIB:.1f}",
            f"grads {self.gradients_bytes / GIB:.1f}",
            f"optimizer {self.optimizer_bytes / GIB:.1f}",
            f"activations {self.activations_bytes / GIB:.1f}",
            *([f"reference model {self.reference_bytes / GIB:.1f}"] if self.reference_bytes else []),
            *([f"generation {self.generation_bytes / GIB:.1f}"] if self.generation_bytes else []),
            f"overhead {self.overhead_bytes / GIB:.1f}",
        )
        line = (
            f"~{self.total_gib:.1f} GiB per {self.device.upper()} ({', '.join(parts)} GiB; "
            f"{self.parameters / 1e6:,.1f}M params, {self.trainable_parameters / 1e6:,.2f}M trainable, {self.dtype})"
        )
        if self.budget_bytes is not None:
            verdict = "fits" if self.fits else "OVER BUDGET"
            line += f" vs {self.budget_bytes / GIB:.0f} GiB {self.budget_source}: {verdict}"
        return line


def shape_from_config(config: Mapping[str, Any]) -> ModelShape:
    """Read a `config.json`-shaped mapping (transformers names) into a `ModelShape`."""
    needed = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "vocab_size")
    missing = [key for key in needed if key not in config]
    if missing:
        raise ModelConfigError(f"model config lacks {', '.join(missing)}")
    return ModelShape(
        hidden_size=int(config["hidden_size"]),
        intermediate_size=int(config["intermediate_size"]),
        num_hidden_layers=int(config["num_hidden_layers"]),
        num_attention_heads=int(config["num_attention_heads"]),
        num_key_value_heads=int(config.get("num_key_value_heads") or config["num_attention_heads"]),
        vocab_size=int(config["vocab_size"]),
        tie_word_embeddings=bool(config.get("tie_word_embeddings", False)),
        torch_dtype=config.get("torch_dtype") or config.get("dtype"),
    )


def lora_parameter_count(shape: ModelShape, rank: int, target_modules: str) -> int:
    """Adapter parameters: `rank * (in + out)` per targeted linear module per layer."""
    names = [n.strip() for n in target_modules.replace(",", " ").split() if n.strip()]
    if not names or names == ["all-linear"]:
        names = list(LINEAR_MODULES)
    shapes = shape.linear_shapes()
    per_layer = sum(rank * (shapes[n][0] + shapes[n][1]) for n in names if n in shapes)
    return shape.num_hidden_layers * per_layer


def optimizer_bytes_per_parameter(optim: str, state_width: int) -> float:
    """Bytes of optimizer state per trainable parameter for a transformers `optim` name."""
    name = optim.lower()
    states = 1 if any(kind in name for kind in ("lion", "rmsprop", "adagrad")) else 2
    if name.startswith("sgd") or "adafactor" in name:
        return 0.0
    if "8bit" in name:
        return float(states)
    if "4bit" in name:
        return states / 2
    return float(states * state_width)


def resolve_dtype(dtype: str, shape: ModelShape) -> str:
    """The dtype weights are loaded in (`auto` follows the checkpoint's own dtype, else float32)."""
    if dtype == "auto":
        return shape.torch_dtype if shape.torch_dtype in DTYPE_BYTES else "float32"
    if dtype not in DTYPE_BYTES:
        raise ModelConfigError(f"unknown dtype {dtype!r} (float32, bfloat16, float16 or auto)")
    return dtype


def estimate_training_memory(
    shape: ModelShape,
    *,
    dtype: str,
    use_peft: bool,
    lora_r: int = 16,
    lora_target_modules: str = "all-linear",
    batch_size: int,
    seq_len: int,
    optim: str = "adamw_torch",
    gradient_checkpointing: bool = False,
    mixed_precision: bool = False,
    distributed: bool = False,
    device: str = "gpu",
    budget_bytes: int | None = None,
    budget_source: str | None = None,
    sequences: int = 1,
    reference_model: bool = False,
    generated_tokens: int = 0,
    reserved_bytes: int = 0,
) -> MemoryEstimate:
    """Estimate training memory per device (see the module docstring for the model); `sequences` per example,
    a frozen `reference_model`, `generated_tokens` whose KV cache is held, `reserved_bytes` another engine holds."""
    load_dtype = resolve_dtype(dtype, shape)
    width = DTYPE_BYTES[load_dtype]
    total_params = shape.parameter_count()
    if use_peft:
        trainable = lora_parameter_count(shape, lora_r, lora_target_modules)
        weights = total_params * width + trainable * 4
        state_width = 4  # PEFT keeps adapters in float32
    else:
        trainable = total_params
        weights = total_params * width
        state_width = width
    gradients = trainable * state_width
    optimizer = int(trainable * optimizer_bytes_per_parameter(optim, state_width))
    # Activations are kept in the autocast dtype when mixed precision is on.
    act_width = 2 if (mixed_precision or width == 2) else 4
    tokens = batch_size * seq_len * sequences
    h, inter = shape.hidden_size, shape.intermediate_size
    per_layer_16bit = tokens * h * (15 + 19 * inter / (4 * h))
    full_layer = int(per_layer_16bit * act_width / 2)
    if gradient_checkpointing:
        activations = shape.num_hidden_layers * tokens * h * act_width + full_layer
    else:
        activations = shape.num_hidden_layers * full_layer
    activations += 2 * tokens * shape.vocab_size * 4
    if distributed:
        gradients *= 2
    reference = total_params * width if reference_model else 0
    generation = 2 * shape.num_hidden_layers * shape.kv_dim * generated_tokens * act_width + reserved_bytes
    base = weights + gradients + optimizer + activations + reference + generation
    overhead = int(GIB + 0.1 * base) if device == "gpu" else GIB // 2
    total = base + overhead
    return MemoryEstimate(
        device=device,
        parameters=total_params,
        trainable_parameters=trainable,
        dtype=load_dtype,
        weights_bytes=weights,
        gradients_bytes=gradients,
        optimizer_bytes=optimizer,
        activations_bytes=int(activations),
        overhead_bytes=overhead,
        total_bytes=int(total),
        reference_bytes=reference,
        generation_bytes=int(generation),
        budget_bytes=budget_bytes,
        budget_source=budget_source,
        fits=None if budget_bytes is None else total <= budget_bytes,
    )


# --- the catalog's glue -------------------------------------------------------------------------


def estimate_run_memory(
    recipe: Recipe, component: Component, params: dict[str, Any], resources: dict[str, Any], repo_root: Path
) -> MemoryEstimate | None:
    """The estimate for a TRL run: the recipe's model config, the run's params, the presets' budget; None if unknown."""
    model = recipe.spec.model
    if model is None or component.name not in TRL_COMPONENTS:
        return None
    config: Mapping[str, Any] | None = model.config
    if config is None and model.path is not None:
        config_file = (
            (repo_root / model.path / "config.json")
            if not Path(model.path).is_absolute()
            else Path(model.path) / "config.json"
        )
        if config_file.is_file():
            config = json.loads(config_file.read_text(encoding="utf-8"))
    if config is None:
        return None
    try:
        shape: ModelShape = shape_from_config(config)
    except ModelConfigError:
        return None
    gpus = int(resources.get("gpus_per_replica") or 0)
    device = "gpu" if gpus else "cpu"
    budget: int | None = None
    budget_source: str | None = None
    if device == "gpu" and resources.get("gpu_memory_gib"):
        budget = int(float(resources["gpu_memory_gib"]) * GIB)
        budget_source = f"GPU memory of {resources.get('gpu_memory_source') or 'the preset'}"
    elif device == "cpu" and resources.get("memory_limit_bytes"):
        budget = int(resources["memory_limit_bytes"])
        budget_source = "memory limit of the preset"
        nproc = str(params.get("nproc_per_node", "")).strip()
        if component.run_kind == "pytorchjob" and nproc.isdigit() and int(nproc) > 1:
            # Every process torchrun starts in the replica shares the replica's memory limit.
            budget //= int(nproc)
            budget_source = f"memory limit of the preset shared by {nproc} processes"
    load = trainer_load(component, params, budget if device == "gpu" else None)
    try:
        return estimate_training_memory(
            shape,
            dtype=str(params.get("dtype", "float32")),
            use_peft=bool(params.get("use_peft", False)),
            lora_r=int(params.get("lora_r", 16)),
            lora_target_modules=str(params.get("lora_target_modules", "all-linear")),
            batch_size=int(params.get("per_device_train_batch_size", 8)),
            seq_len=int(load.pop("seq_len", params.get("max_length", 1024))),
            optim=str(params.get("optim", "adamw_torch")),
            gradient_checkpointing=bool(params.get("gradient_checkpointing", False)),
            mixed_precision=bool(params.get("bf16", False)),
            distributed=component.run_kind == "pytorchjob",
            device=device,
            budget_bytes=budget,
            budget_source=budget_source,
            **load,
        )
    except ModelConfigError:
        return None


def trainer_load(component: Component, params: Mapping[str, Any], gpu_bytes: int | None) -> dict[str, Any]:
    """What a run's trainer adds to the estimate (see the module docstring): keyword arguments of
    `estimate_training_memory`, and `seq_len` where the trainer has no `max_length`."""
    kind = component_trainer(component)
    if kind is None or kind.name == "sft":
        return {}
    load: dict[str, Any] = {"reference_model": holds_reference(kind, dict(params))}
    if kind.name in ("dpo", "kto", "reward"):
        load["sequences"] = 2
    if kind.takes_rewards:
        completion = int(params.get("max_completion_length") or 256)
        load["seq_len"] = PROMPT_TOKENS + completion
        load["generated_tokens"] = int(params.get("per_device_train_batch_size") or 8) * (PROMPT_TOKENS + completion)
        if params.get("use_vllm") and params.get("vllm_mode") == "colocate" and gpu_bytes:
            load["reserved_bytes"] = int(float(params.get("vllm_gpu_memory_utilization") or 0.3) * gpu_bytes)
    return load
