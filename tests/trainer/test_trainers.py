"""The trainer table and `--trainer`: each trainer's flags parse, others are refused; per-trainer defaults, hash."""

from __future__ import annotations

from pathlib import Path

import pytest

from trainer.config import parse_args, requested_trainer
from trainer.evaluation import PROCEDURE_METRICS, parse_metric_names
from trainer.provenance import local_recipe_hash
from trainer.trainers import TRAINERS, UnknownTrainerError, missing_columns, trainer_spec

# One flag of each trainer's own config, as a recipe would set it, and the value it parses to.
OWN_FLAGS: dict[str, tuple[list[str], str, object]] = {
    "sft": (["--assistant_only_loss", "true"], "assistant_only_loss", True),
    "dpo": (["--beta", "0.25", "--loss_type", "ipo"], "loss_type", ["ipo"]),
    "grpo": (["--num_generations", "4", "--max_completion_length", "16"], "num_generations", 4),
    "kto": (["--desirable_weight", "1.5", "--undesirable_weight", "0.5"], "undesirable_weight", 0.5),
    "reward": (["--center_rewards_coefficient", "0.01"], "center_rewards_coefficient", 0.01),
    "rloo": (["--num_generations", "4", "--normalize_advantages", "true"], "normalize_advantages", True),
}
REWARDS = ["--reward_funcs", "format,exact-match"]


def argv_for(name: str, *flags: str) -> list[str]:
    """`--trainer NAME` plus the reward functions GRPO and RLOO require."""
    return ["--trainer", name, *(REWARDS if trainer_spec(name).takes_reward_funcs else []), *flags]


@pytest.mark.parametrize("name", list(TRAINERS))
def test_every_trainer_of_the_table_parses_its_own_flags(name: str) -> None:
    flags, field, expected = OWN_FLAGS[name]
    script, training, _, evaluation = parse_args(argv_for(name, *flags))
    spec = TRAINERS[name]
    assert script.trainer == name
    assert type(training).__name__ == spec.config_class
    assert getattr(training, field) == expected
    assert evaluation.eval_procedure_version == spec.procedure
    assert evaluation.eval_metrics == spec.default_metrics
    assert parse_metric_names(spec.default_metrics, spec.procedure)
    # The project's CPU defaults hold for every trainer.
    assert training.bf16 is False and not training.gradient_checkpointing and training.output_dir == ""


@pytest.mark.parametrize("name", list(TRAINERS))
def test_every_trainer_names_real_trl_classes_and_a_known_procedure(name: str) -> None:
    import trl

    spec = TRAINERS[name]
    assert issubclass(getattr(trl, spec.trainer_class), trl.trainer.base_trainer._BaseTrainer)
    assert getattr(trl, spec.config_class) is not None
    assert spec.procedure in PROCEDURE_METRICS
    assert spec.model_head in ("causal-lm", "reward")
    _, training, _, _ = parse_args(argv_for(name))
    for key in spec.recipe_keys:
        assert key == "warmup_ratio" or hasattr(training, key), key


@pytest.mark.parametrize(
    ("argv", "flag"),
    [
        (["--beta", "0.1"], "--beta"),
        (["--trainer", "dpo", "--num_generations", "4"], "--num_generations"),
        (["--trainer", "dpo", "--reward_funcs", "format"], "--reward_funcs"),
        (["--trainer", "reward", "--desirable_weight", "2"], "--desirable_weight"),
    ],
    ids=["dpo-flag-for-sft", "grpo-flag-for-dpo", "rewards-for-dpo", "kto-flag-for-reward"],
)
def test_a_flag_the_chosen_trainer_lacks_is_refused(argv: list[str], flag: str) -> None:
    with pytest.raises(ValueError, match="not flags of --trainer") as raised:
        parse_args(argv)
    assert flag in str(raised.value)


def test_a_value_outside_the_trainers_choices_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_args(["--trainer", "kto", "--loss_type", "sigmoid"])  # a DPO loss: KTO's are kto, apo_zero_unpaired
    assert "invalid choice: 'sigmoid'" in capsys.readouterr().err


def test_a_dpo_flag_for_sft_gets_the_parsers_error() -> None:
    with pytest.raises(ValueError, match=r"not used by the HfArgumentParser: \['--beta', '0.2'\].*--trainer sft"):
        parse_args(["--beta", "0.2"])


def test_an_unknown_trainer_is_refused_listing_the_known() -> None:
    with pytest.raises(UnknownTrainerError, match="unknown trainer 'ppo'; known: sft, dpo, grpo, kto, reward, rloo"):
        parse_args(["--trainer", "ppo"])


@pytest.mark.parametrize("name", ["grpo", "rloo"])
def test_generation_trainers_need_known_reward_functions(name: str) -> None:
    with pytest.raises(ValueError, match="no reward functions given"):
        parse_args(["--trainer", name])
    with pytest.raises(ValueError, match=r"unknown reward functions .'bleu'.; known: format, length, exact-match"):
        parse_args(["--trainer", name, "--reward_funcs", "format,bleu"])
    script, *_ = parse_args(["--trainer", name, "--reward_funcs", " length , format"])
    assert script.reward_funcs == "length,format"


def test_the_trainer_comes_from_the_recipe_yaml_and_the_command_line_wins(tmp_path: Path) -> None:
    recipe = tmp_path / "recipe-trainer.yaml"
    recipe.write_text("trainer: dpo\nbeta: 0.3\nmodel_name_or_path: m\n")
    script, training, *_ = parse_args(["--config", str(recipe)])
    assert (script.trainer, type(training).__name__, training.beta) == ("dpo", "DPOConfig", 0.3)
    assert requested_trainer(["--config", str(recipe), "--trainer=kto"]) == "kto"
    assert requested_trainer(["--config", str(recipe), "--trainer", "sft"]) == "sft"
    assert requested_trainer(["--model_name_or_path", "m"]) == "sft"
    recipe.write_text("trainer: kto\nnum_generations: 4\n")
    with pytest.raises(ValueError, match=r"Unknown arguments from config file.*num_generations.*--trainer kto"):
        parse_args(["--config", str(recipe)])


def test_a_reward_model_with_lora_is_a_sequence_classifier() -> None:
    _, _, model, _ = parse_args(["--trainer", "reward", "--use_peft"])
    assert model.lora_task_type == "SEQ_CLS"
    _, _, model, _ = parse_args(["--trainer", "dpo", "--use_peft"])
    assert model.lora_task_type == "CAUSAL_LM"


def test_sfts_local_recipe_hash_is_what_it_was() -> None:
    # Computed with the SFT-only `local_recipe_hash` before the other trainers came: old checkpoints still resume.
    script, training, model, _ = parse_args(["--model_name_or_path", "m", "--dataset_name", "d"])
    assert local_recipe_hash(trainer_spec("sft"), script, training, model) == "local-d2d237a46493bbde"


def test_the_local_recipe_hash_covers_the_trainer_and_its_own_keys() -> None:
    def hashed(*flags: str) -> str:
        script, training, model, _ = parse_args(["--model_name_or_path", "m", "--dataset_name", "d", *flags])
        return local_recipe_hash(trainer_spec(script.trainer), script, training, model)

    dpo = hashed("--trainer", "dpo")
    assert dpo != hashed() and dpo != hashed("--trainer", "kto")
    assert hashed("--trainer", "dpo", "--beta", "0.5") != dpo
    assert hashed("--trainer", "dpo", "--max_steps", "99") == dpo  # a longer schedule may resume
    grpo = hashed(*argv_for("grpo"))
    assert hashed("--trainer", "grpo", "--reward_funcs", "format") != grpo
    assert hashed(*argv_for("grpo", "--num_generations", "4")) != grpo


def test_missing_train_columns_name_the_first_alternative() -> None:
    assert missing_columns(trainer_spec("kto"), ["prompt", "chosen", "rejected"]) is None
    assert missing_columns(trainer_spec("kto"), ["prompt", "completion"]) == ("label",)
    assert missing_columns(trainer_spec("grpo"), ["messages"]) == ("prompt",)
    assert missing_columns(trainer_spec("sft"), ["anything"]) is None
