"""The TRL trainers `python -m trainer --trainer NAME` runs, as data: one `TrainerSpec` per name.

The table is what differs between trainers; the run itself (`trainer.run.main`) is one flow for all of them.
A spec names TRL's config and trainer classes (by name: this module stays cheap to import), the model head,
whether the trainer takes reward functions, the data it trains on, its evaluation procedure and default
metrics (see `trainer.evaluation`), the config fields that enter the local recipe hash, and parser defaults.

Reference models are TRL's business: DPO and KTO build one from the policy's path unless `--use_peft` (the
adapter-disabled base) or `--precompute_ref_log_probs` (log-probs computed once before training); GRPO and RLOO
build one only when `--beta` is not 0 and `--use_peft` is off (GRPO's default beta is 0.0, RLOO's 0.05).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Config fields every trainer's local recipe hash covers (the schedule's length is left out on purpose: resuming
# with a longer one is allowed). `warmup_ratio` is gone from transformers 5 and hashes as "None": it stays so that
# SFT's hash stays what it was; the other trainers list `warmup_steps` (which takes a ratio too) among their keys.
COMMON_RECIPE_KEYS = (
    "learning_rate",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "seed",
    "lr_scheduler_type",
    "warmup_ratio",
    "bf16",
    "weight_decay",
)

# The recipe keys GRPO and RLOO share.
_GENERATION_KEYS = (
    "warmup_steps",
    "beta",
    "num_generations",
    "max_completion_length",
    "temperature",
    "top_p",
    "top_k",
    "epsilon",
    "epsilon_high",
    "num_iterations",
    "reward_weights",
)


@dataclass(frozen=True)
class TrainerSpec:
    """What one trainer kind needs from the shared run flow."""

    name: str
    config_class: str  # attribute of `trl`
    trainer_class: str  # attribute of `trl`
    model_head: str  # "causal-lm" (AutoModelForCausalLM) or "reward" (AutoModelForSequenceClassification, 1 label)
    train_columns: tuple[tuple[str, ...], ...]  # the train split must hold one of these column sets
    procedure: str  # evaluation procedure version (trainer.evaluation)
    default_metrics: str
    recipe_keys: tuple[str, ...]  # config fields (beyond COMMON_RECIPE_KEYS) the local recipe hash covers
    takes_reward_funcs: bool = False
    reference_model: bool = False  # TRL may build a reference model from the policy's path
    parser_defaults: dict[str, Any] = field(default_factory=dict)


TRAINERS: dict[str, TrainerSpec] = {
    spec.name: spec
    for spec in (
        TrainerSpec(
            name="sft",
            config_class="SFTConfig",
            trainer_class="SFTTrainer",
            model_head="causal-lm",
            train_columns=(),  # messages, text, prompt/completion ...: SFTTrainer tells
            procedure="v1",
            default_metrics="eval_loss,eval_perplexity",
            recipe_keys=("max_length", "assistant_only_loss", "packing", "dataset_text_field"),
        ),
        TrainerSpec(
            name="dpo",
            config_class="DPOConfig",
            trainer_class="DPOTrainer",
            model_head="causal-lm",
            train_columns=(("chosen", "rejected"),),
            procedure="pref-v1",
            default_metrics="eval_preference_accuracy,eval_reward_margin",
            recipe_keys=(
                "warmup_steps",
                "beta",
                "loss_type",
                "loss_weights",
                "label_smoothing",
                "f_divergence_type",
                "ld_alpha",
                "use_weighting",
                "max_length",
            ),
            reference_model=True,
        ),
        TrainerSpec(
            name="grpo",
            config_class="GRPOConfig",
            trainer_class="GRPOTrainer",
            model_head="causal-lm",
            train_columns=(("prompt",),),
            procedure="gen-v1",
            default_metrics="eval_mean_reward",
            recipe_keys=(*_GENERATION_KEYS, "loss_type", "scale_rewards", "multi_objective_aggregation"),
            takes_reward_funcs=True,
            reference_model=True,
        ),
        TrainerSpec(
            name="kto",
            config_class="KTOConfig",
            trainer_class="KTOTrainer",
            model_head="causal-lm",
            train_columns=(("prompt", "completion", "label"), ("chosen", "rejected")),
            procedure="pref-v1",
            default_metrics="eval_preference_accuracy,eval_reward_margin",
            recipe_keys=("warmup_steps", "beta", "loss_type", "desirable_weight", "undesirable_weight", "max_length"),
            reference_model=True,
        ),
        TrainerSpec(
            name="reward",
            config_class="RewardConfig",
            trainer_class="RewardTrainer",
            model_head="reward",
            train_columns=(("chosen", "rejected"),),
            procedure="reward-v1",
            default_metrics="eval_pairwise_accuracy,eval_reward_margin",
            recipe_keys=("warmup_steps", "max_length", "center_rewards_coefficient"),
            # LoRA on a sequence classifier: PEFT then also trains (and saves) the new score head.
            parser_defaults={"lora_task_type": "SEQ_CLS"},
        ),
        TrainerSpec(
            name="rloo",
            config_class="RLOOConfig",
            trainer_class="RLOOTrainer",
            model_head="causal-lm",
            train_columns=(("prompt",),),
            procedure="gen-v1",
            default_metrics="eval_mean_reward",
            recipe_keys=(*_GENERATION_KEYS, "normalize_advantages", "reward_clip_range"),
            takes_reward_funcs=True,
            reference_model=True,
        ),
    )
}

DEFAULT_TRAINER = "sft"


class UnknownTrainerError(ValueError):
    """`--trainer` names no trainer of the table."""


def trainer_spec(name: str) -> TrainerSpec:
    """The spec of trainer `name`, or UnknownTrainerError listing the known ones."""
    try:
        return TRAINERS[name]
    except KeyError:
        raise UnknownTrainerError(f"unknown trainer {name!r}; known: {', '.join(TRAINERS)}") from None


def missing_columns(spec: TrainerSpec, columns: list[str]) -> tuple[str, ...] | None:
    """None when `columns` hold one of the spec's train column sets, else the first set's missing columns."""
    if not spec.train_columns or any(set(wanted) <= set(columns) for wanted in spec.train_columns):
        return None
    return tuple(name for name in spec.train_columns[0] if name not in columns)
