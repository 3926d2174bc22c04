"""The command-line contract: TrlParser over our dataclasses, YAML defaults, command-line overrides."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.trainer.runs import REPO
from trainer.config import EvalArguments, normalize_target_modules, parse_args
from trainer.evaluation import contract_from_args


def test_yaml_sets_defaults_and_command_line_wins(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe-trainer.yaml"
    recipe.write_text(
        "model_name_or_path: some/model\nmodel_revision: abc123\nlearning_rate: 0.003\nmax_steps: 10\n"
        "dataset_name: manifests/datasets/tiny-chat\neval_metrics: eval_loss\nuse_peft: true\n"
    )
    script, training, model, evaluation = parse_args(["--config", str(recipe), "--max_steps", "20"])
    assert training.max_steps == 20
    assert training.learning_rate == 0.003
    assert model.model_name_or_path == "some/model"
    assert model.model_revision == "abc123"
    assert model.use_peft is True
    assert script.dataset_name == "manifests/datasets/tiny-chat"
    assert evaluation.eval_metrics == "eval_loss"


def test_project_defaults_suit_cpu_machines() -> None:
    _, training, model, _ = parse_args(["--model_name_or_path", "m"])
    assert training.bf16 is False
    assert not training.gradient_checkpointing
    assert training.output_dir == ""  # resolved at run time: Polyaxon outputs or ./outputs
    assert model.dtype == "float32"


@pytest.mark.parametrize("flag", ["--resume_from", "--resume-from"], ids=["underscore", "dash"])
def test_resume_flag_spellings(flag: str) -> None:
    script, *_ = parse_args([flag, "latest"])
    assert script.resume_from == "latest"


def test_retention_flags_as_the_component_renders_them() -> None:
    script, training, *_ = parse_args(["--model_name_or_path", "m"])
    assert training.save_total_limit == 3 and script.keep_best_checkpoint is True
    script, training, *_ = parse_args(["--save_total_limit=5", "--keep_best_checkpoint=False"])
    assert training.save_total_limit == 5 and script.keep_best_checkpoint is False


@pytest.mark.parametrize(
    ("metrics", "keep_best", "expected"),
    [
        ("eval_perplexity,eval_loss", True, (3, True, "eval_loss", False, 2)),
        ("eval_mean_token_accuracy", True, (3, True, "eval_mean_token_accuracy", True, 2)),
        ("eval_loss", False, (3, False, None, None, 5)),
    ],
    ids=["perplexity-ranks-by-loss", "accuracy-higher-is-better", "best-off"],
)
def test_retention_takes_rotation_over_and_evaluates_at_saves(
    metrics: str, keep_best: bool, expected: tuple[object, ...]
) -> None:
    from trainer.run import configure_retention

    _, training, _, _ = parse_args(["--save_steps", "2", "--eval_steps", "5", "--eval_strategy", "steps"])
    contract = contract_from_args(EvalArguments(eval_dataset_name="manifests/datasets/tiny-chat", eval_metrics=metrics))
    keep, best = configure_retention(training, contract, keep_best)
    assert training.save_total_limit is None  # the trainer rotates, after the completeness marker
    assert (keep, best, training.metric_for_best_model, training.greater_is_better, training.eval_steps) == expected
    assert training.load_best_model_at_end is False  # the final model stays the last one


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--lora_target_modules", "q_proj,v_proj"], ["q_proj", "v_proj"]),
        (["--lora_target_modules", "q_proj", "v_proj"], ["q_proj", "v_proj"]),
        (["--lora_target_modules", "all-linear"], "all-linear"),
        ([], None),
    ],
    ids=["comma", "space", "single", "unset"],
)
def test_lora_target_modules(argv: list[str], expected: object) -> None:
    _, _, model, _ = parse_args(["--use_peft", *argv])
    assert model.lora_target_modules == expected


def test_normalize_target_modules_strips_blanks() -> None:
    assert normalize_target_modules(["q_proj, ", "v_proj"]) == ["q_proj", "v_proj"]


def test_bool_flags_take_bare_and_valued_forms() -> None:
    _, training, model, _ = parse_args(["--use_peft", "--bf16", "false"])
    assert model.use_peft is True
    assert training.bf16 is False
    _, _, model, _ = parse_args(["--use_peft=false"])
    assert model.use_peft is False


def test_unknown_flag_is_refused() -> None:
    with pytest.raises(ValueError, match="no_such_flag"):
        parse_args(["--no_such_flag", "1"])


def test_config_import_is_cheap() -> None:
    code = (
        "import sys, trainer.config, trainer.evaluation, trainer.checkpoints, trainer.data, trainer.tiny_data\n"
        "import trainer.trainers, trainer.rewards, trainer.provenance, trainer.tiny_align_data\n"
        "heavy = {'torch', 'transformers', 'trl', 'datasets', 'peft', 'polyaxon'} & set(sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    subprocess.run([sys.executable, "-c", code], cwd=REPO, check=True)
