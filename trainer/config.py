"""The trainer's own arguments and its parser (TRL's shape: dataclasses with `help`, parsed by `TrlParser`).

`ScriptArguments` and `EvalArguments` are plain dataclasses so that `import trainer.config` stays
cheap; `build_parser(trainer)` imports TRL inside and combines them with the chosen trainer's TRL config
(`SFTConfig`, `DPOConfig`, `GRPOConfig`, `KTOConfig`, `RewardConfig`, `RLOOConfig`: see `trainer.trainers`)
and `ModelConfig`, so each trainer's own flags parse and a flag its config lacks is refused. GRPO and RLOO
take `RewardScriptArguments` (adds `--reward_funcs`). A YAML file given with `--config` sets the defaults;
flags on the command line win over it. `--trainer` is read first (command line, else the YAML's `trainer:`,
else `sft`), since it decides which flags exist.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from trainer.trainers import DEFAULT_TRAINER, TRAINERS, trainer_spec

DEFAULT_LOCAL_OUTPUT_DIR = "outputs"

# SFTConfig defaults that do not suit this project (see DESIGN.md, "The trainer on these machines"):
# bf16 on by default fails on CPU, gradient checkpointing costs ~2x on small models, and the output
# folder must stay unset so that a Polyaxon run's outputs path can be chosen at run time. Checkpoints
# are rotated by the trainer itself (see `configure_retention` in `trainer.run`): 3 newest, plus the best.
TRAINER_DEFAULTS: dict[str, Any] = {
    "bf16": False,
    "gradient_checkpointing": None,
    "output_dir": "",
    "report_to": "none",
    "logging_steps": 10,
    "save_strategy": "steps",
    "save_steps": 500,
    "save_total_limit": 3,
    "disable_tqdm": True,
}


@dataclass
class ScriptArguments:
    """Data, pins and resume arguments of `python -m trainer`."""

    trainer: str = field(
        default=DEFAULT_TRAINER,
        metadata={"help": "Which TRL trainer runs.", "choices": list(TRAINERS)},
    )
    dataset_name: str = field(
        default="",
        metadata={"help": "Training data: a hub dataset id, or a local folder or .jsonl/.json/.parquet file."},
    )
    dataset_revision: str = field(
        default="main",
        metadata={"help": "Dataset revision (commit sha) for a hub dataset; ignored for local data."},
    )
    dataset_digest: str = field(
        default="",
        metadata={"help": "sha256 of the local data files (see trainer.data.dataset_digest); verified when set."},
    )
    dataset_split: str = field(default="train", metadata={"help": "Split of the training dataset to train on."})
    recipe_name: str = field(default="", metadata={"help": "Name of the catalog recipe this run comes from."})
    recipe_hash: str = field(
        default="",
        metadata={"help": "Hash of the resolved recipe; checkpoints only resume into a run with the same hash."},
    )
    code_revision: str = field(
        default="", metadata={"help": "Git revision of the training code (defaults to `git rev-parse HEAD`)."}
    )
    image_digest: str = field(default="", metadata={"help": "Digest of the container image the run uses."})
    resume_from: str = field(
        default="",
        metadata={
            "help": "`latest` (the newest complete checkpoint in --output_dir) or `checkpoint-<N>` (that one, in "
            "--output_dir); empty starts from scratch. No paths: a resumed run's outputs hold the copied checkpoint."
        },
    )
    base_run: str = field(
        default="",
        metadata={
            "help": "Start from a finished run's final model: that run's uuid. --model_name_or_path is then the model "
            "folder inside its artifacts, which Polyaxon's init step copied to <context root>/artifacts/<run>/."
        },
    )
    base_model_digest: str = field(
        default="",
        metadata={"help": "The folder digest the base run's outputs recorded for that model; verified before loading."},
    )
    keep_best_checkpoint: bool = field(
        default=True,
        metadata={
            "help": "Keep the best checkpoint by the eval contract's first metric besides the newest "
            "--save_total_limit ones (evaluation then runs at every save step)."
        },
    )
    metrics_jsonl: str = field(
        default="",
        metadata={"help": "Local JSONL tracking file (default: OUTPUT_DIR/metrics.jsonl)."},
    )


@dataclass
class RewardScriptArguments(ScriptArguments):
    """ScriptArguments of the trainers that score generated completions (GRPO, RLOO)."""

    reward_funcs: str = field(
        default="",
        metadata={"help": "Comma-separated reward functions (see trainer.rewards.REGISTRY), e.g. `format,length`."},
    )


@dataclass
class EvalArguments:
    """The recipe's fixed evaluation contract (see trainer.evaluation)."""

    eval_dataset_name: str = field(
        default="", metadata={"help": "Evaluation data: hub id, local folder or file; empty disables evaluation."}
    )
    eval_dataset_revision: str = field(default="main", metadata={"help": "Evaluation dataset revision."})
    eval_split: str = field(default="eval", metadata={"help": "Split of the evaluation dataset."})
    eval_max_samples: int = field(
        default=0, metadata={"help": "Evaluate on this many rows (seeded selection); 0 means all rows."}
    )
    eval_metrics: str = field(
        default="eval_loss,eval_perplexity",
        metadata={
            "help": "Comma-separated metric names to report (see trainer.evaluation.PROCEDURE_METRICS; a harness "
            "contract: TASK-METRIC); the default depends on --trainer."
        },
    )
    eval_procedure_version: str = field(
        default="v1",
        metadata={
            "help": "Version of the evaluation procedure (see trainer.evaluation); the default depends on --trainer."
        },
    )
    eval_seed: int = field(
        default=0, metadata={"help": "Seed of the evaluation row selection (a harness contract: lm-eval's seeds)."}
    )
    eval_contract_hash: str = field(
        default="",
        metadata={"help": "Expected hash of the eval contract; the run refuses to start when it differs."},
    )
    # A harness contract (trainer.harness, procedure lm-eval-v1) instead of an eval dataset: the final model only.
    eval_harness: str = field(
        default="",
        metadata={"help": "`lm-eval`: evaluate the final model with lm-evaluation-harness (trainer.harness)."},
    )
    eval_harness_version: str = field(
        default="", metadata={"help": "The lm-eval version the contract pins; the run refuses any other."}
    )
    eval_tasks: str = field(
        default="",
        metadata={"help": "Comma-separated harness tasks NAME@VERSION@sha256:HEX (task.yaml version, folder digest)."},
    )
    eval_tasks_dir: str = field(
        default="manifests/evals/tasks",
        metadata={"help": "Folder holding one folder per harness task (task.yaml and its data files)."},
    )
    eval_num_fewshot: int = field(default=0, metadata={"help": "Few-shot examples per harness prompt."})
    eval_limit: int = field(default=0, metadata={"help": "Harness documents per task; 0 means every document."})
    eval_chat_template: bool = field(
        default=False, metadata={"help": "Render harness prompts through the tokenizer's chat template."}
    )


def build_parser(trainer: str = DEFAULT_TRAINER) -> Any:
    """Return a `TrlParser` over (script args, the trainer's TRL config, ModelConfig, EvalArguments) with defaults."""
    import trl

    spec = trainer_spec(trainer)
    script_class = RewardScriptArguments if spec.takes_reward_funcs else ScriptArguments
    dataclass_types: Any = (script_class, getattr(trl, spec.config_class), trl.ModelConfig, EvalArguments)
    parser = trl.TrlParser(dataclass_types, prog=f"python -m trainer --trainer {spec.name}")
    parser.set_defaults(
        **TRAINER_DEFAULTS,
        **spec.parser_defaults,
        eval_metrics=spec.default_metrics,
        eval_procedure_version=spec.procedure,
    )
    return parser


def parse_args(argv: Sequence[str] | None = None) -> tuple[Any, Any, Any, Any]:
    """Parse `--config recipe.yaml` plus command-line overrides into (script, training, model, eval) args."""
    prepare_cpu_distributed()
    args = list(argv) if argv is not None else sys.argv[1:]
    spec = trainer_spec(requested_trainer(args))
    parser = build_parser(spec.name)
    try:
        script_args, training_args, model_args, eval_args = parser.parse_args_and_config(args=args)
    except ValueError as exc:
        if "not used by the HfArgumentParser" not in str(exc) and "Unknown arguments" not in str(exc):
            raise
        raise ValueError(
            f"{exc} (not flags of --trainer {spec.name}; see `python -m trainer --trainer {spec.name} --help`)"
        ) from exc
    model_args.lora_target_modules = normalize_target_modules(model_args.lora_target_modules)
    if spec.takes_reward_funcs:
        from trainer.rewards import parse_reward_names

        script_args.reward_funcs = ",".join(parse_reward_names(script_args.reward_funcs))
    return script_args, training_args, model_args, eval_args


def requested_trainer(args: Sequence[str]) -> str:
    """The trainer named by `--trainer X` / `--trainer=X` on the command line, else by the `--config` YAML, else sft.

    Read before parsing because the trainer decides which flags exist; the parser then reads the same value.
    """
    for index, arg in enumerate(args):
        if arg in ("--trainer",) and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("--trainer="):
            return arg.split("=", 1)[1]
    if "--config" in args and args.index("--config") + 1 < len(args):
        import yaml

        config = yaml.safe_load(Path(args[args.index("--config") + 1]).read_text())
        if isinstance(config, dict) and config.get("trainer"):
            return str(config["trainer"])
    return DEFAULT_TRAINER


def prepare_cpu_distributed() -> None:
    """Under torchrun on a machine without CUDA, make Accelerate use the CPU (gloo) process group.

    Accelerate only builds a multi-CPU state when told it runs on CPU; `--use_cpu` would also do
    that but changes precision defaults, so the environment switch is used (before the
    TrainingArguments set up their device).
    """
    if int(os.environ.get("WORLD_SIZE", "1")) <= 1 or "ACCELERATE_USE_CPU" in os.environ:
        return
    import torch

    if not torch.cuda.is_available():
        os.environ["ACCELERATE_USE_CPU"] = "true"


def normalize_target_modules(value: str | list[str] | None) -> str | list[str] | None:
    """Accept LoRA target modules space- or comma-separated; keep `all-linear` (and other single names) as is."""
    if value is None:
        return None
    items = [value] if isinstance(value, str) else list(value)
    names = [name.strip() for item in items for name in item.split(",") if name.strip()]
    if len(names) == 1 and isinstance(value, str):
        return names[0]
    return names
