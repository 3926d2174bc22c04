"""`LeanSFTTrainer`: the Trainer's flops estimate with the parameters counted once; no draft model card."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.runs import TINY_CHAT

pytestmark = pytest.mark.trainer


def lean_trainer(model_dir: Path, out: Path) -> Any:
    """A `LeanSFTTrainer` on the tiny model and the tiny chat data, as `trainer.run.main` builds one."""
    from datasets import load_dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import SFTConfig

    from trainer.lean import LeanSFTTrainer

    args = SFTConfig(
        output_dir=str(out), bf16=False, gradient_checkpointing=False, max_steps=2, max_length=128, report_to="none"
    )
    dataset = load_dataset("json", data_files={"train": str(TINY_CHAT / "train.jsonl")}, split="train")
    return LeanSFTTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype="float32"),
        args=args,
        train_dataset=dataset,
        processing_class=AutoTokenizer.from_pretrained(model_dir),
    )


def test_flops_are_the_trainers_estimate_with_the_parameters_counted_once(tiny_model: Path, tmp_path: Path) -> None:
    from transformers import Trainer

    trainer = lean_trainer(tiny_model, tmp_path)
    first = next(iter(trainer.get_train_dataloader()))
    second = {"input_ids": first["input_ids"][:3, :10]}  # another batch shape: the estimate follows the tokens
    expected = [Trainer.floating_point_ops(trainer, batch) for batch in (first, second)]
    counted = trainer.model.num_parameters
    calls: list[bool] = []

    def num_parameters(**kwargs: Any) -> int:
        calls.append(kwargs.get("exclude_embeddings", False))
        return int(counted(**kwargs))

    trainer.model.num_parameters = num_parameters
    assert [trainer.floating_point_ops(batch) for batch in (first, second, first)] == [*expected, expected[0]]
    assert calls == [True]
    assert expected[0] > expected[1] > 0


def test_no_draft_model_card_at_checkpoints(tiny_model: Path, tmp_path: Path) -> None:
    trainer = lean_trainer(tiny_model, tmp_path)
    trainer.args.save_steps = 1
    trainer.train()
    assert (tmp_path / "checkpoint-1").is_dir() and (tmp_path / "checkpoint-2").is_dir()
    assert not (tmp_path / "README.md").exists()


@pytest.mark.parametrize("name", ["DPOTrainer", "GRPOTrainer", "KTOTrainer", "RewardTrainer", "RLOOTrainer"])
def test_every_trl_trainer_has_its_lean_class(name: str) -> None:
    import trl

    from trainer.lean import LeanTrainerMixin, lean_trainer_class

    base = getattr(trl, name)
    lean = lean_trainer_class(base)
    assert issubclass(lean, base) and lean.__name__ == f"Lean{name}"
    assert lean.create_model_card is LeanTrainerMixin.create_model_card
    assert lean_trainer_class(base) is lean


@pytest.mark.parametrize(("setting", "pings"), [("1", 0), ("0", 1)], ids=["disabled", "allowed"])
def test_telemetry_follows_the_variable_when_the_trainer_starts(
    setting: str, pings: int, tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import trl.trainer.base_trainer as base_trainer

    sent: list[str] = []
    monkeypatch.setattr(base_trainer, "send_telemetry", lambda topic, **kwargs: sent.append(topic))
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", setting)  # huggingface_hub read it at import: too late for it
    lean_trainer(tiny_model, tmp_path)
    assert sent == ["trl/other"] * pings


def test_the_entry_point_turns_telemetry_off_before_importing_trl(monkeypatch: pytest.MonkeyPatch) -> None:
    from trainer.__main__ import run

    monkeypatch.delenv("HF_HUB_DISABLE_TELEMETRY", raising=False)
    with pytest.raises(SystemExit):
        run(["--help"])
    assert os.environ["HF_HUB_DISABLE_TELEMETRY"] == "1"
