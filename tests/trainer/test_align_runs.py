"""Real short runs of DPO, GRPO, KTO, reward models and RLOO through `python -m trainer`'s entry point, in process.

Each writes what an SFT run writes: model/, eval_results.json (the trainer's procedure and contract hash),
metrics.jsonl, checkpoints with their completeness marker; stop and resume work as for SFT.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import threading
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.runs import TINY_CHAT, align_args, read_jsonl, train_in_process, train_losses
from trainer.checkpoints import missing_parts, read_meta
from trainer.data import DatasetError
from trainer.digests import manifest_digest
from trainer.evaluation import contract_hash
from trainer.run import EXIT_STOPPED
from trainer.trainers import TRAINERS

pytestmark = pytest.mark.trainer


def records(out: Path, kind: str) -> list[dict[str, Any]]:
    """Tracking records of one kind."""
    return [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == kind]


def eval_metrics(out: Path) -> list[tuple[int, dict[str, float]]]:
    """(step, metrics) of every evaluation the tracking file recorded."""
    return [
        (r["step"], r["metrics"]) for r in records(out, "metrics") if any(k.startswith("eval_") for k in r["metrics"])
    ]


def assert_complete_run(out: Path, trainer: str, steps: tuple[int, ...]) -> dict[str, Any]:
    """The outputs every finished run has; returns eval_results.json."""
    document = json.loads((out / "eval_results.json").read_text())
    spec = TRAINERS[trainer]
    assert document["contract"]["procedure_version"] == spec.procedure
    assert set(document["metrics"]) == set(spec.default_metrics.split(","))
    assert document["contract_hash"] == contract_hash(document["contract"])
    assert document["global_step"] == steps[-1]
    for step in steps:
        assert missing_parts(out / f"checkpoint-{step}") == []
        meta = read_meta(out / f"checkpoint-{step}")
        assert meta is not None and meta.global_step == step
    outputs: dict[str, Any] = {}
    for record in records(out, "outputs"):
        outputs.update(record["outputs"])
    assert outputs["model_digest"] == manifest_digest(out / "model")
    assert outputs["checkpoint_latest"] == f"checkpoint-{steps[-1]}"
    results = records(out, "results")[-1]["results"]
    assert results["eval_contract_hash"] == document["contract_hash"]
    assert sorted(train_losses(out / "metrics.jsonl")) == list(range(1, steps[-1] + 1))
    params = records(out, "params")[0]["params"]
    assert params["config"]["script"]["trainer"] == trainer
    assert not (out / "README.md").exists()  # no draft model card (trainer.lean); PEFT writes its own in model/
    return document


@pytest.fixture(scope="module")
def dpo_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four DPO steps (checkpoints at 2 and 4), evaluated before training and at every save."""
    out = tmp_path_factory.mktemp("dpo")
    assert train_in_process(align_args("dpo", tiny_model, out, eval_steps=2, eval_on_start="true")) == 0
    return out


def test_dpo_writes_the_run_outputs(dpo_run: Path) -> None:
    assert_complete_run(dpo_run, "dpo", (2, 4))
    train = [r["metrics"] for r in records(dpo_run, "metrics") if "loss" in r["metrics"]]
    assert {"rewards/accuracies", "rewards/margins", "logps/chosen"} <= set(train[0])


def test_dpo_preference_accuracy_rises_from_the_reference(dpo_run: Path) -> None:
    evals = eval_metrics(dpo_run)
    assert [step for step, _ in evals] == [0, 2, 4, 4]  # on start, at each save, the contract's final evaluation
    start, end = evals[0][1], evals[-1][1]
    assert start == {"eval_preference_accuracy": 0.0, "eval_reward_margin": 0.0, "epoch": 0.0}  # policy = reference
    assert end["eval_preference_accuracy"] >= 0.75 and end["eval_reward_margin"] > 0


def test_dpo_resumes_with_identical_losses(dpo_run: Path, tiny_model: Path, tmp_path: Path) -> None:
    shutil.copytree(dpo_run / "checkpoint-2", tmp_path / "checkpoint-2")
    assert train_in_process(align_args("dpo", tiny_model, tmp_path, eval_steps=2, resume_from="checkpoint-2")) == 0
    before, after = train_losses(dpo_run / "metrics.jsonl"), train_losses(tmp_path / "metrics.jsonl")
    assert after == {step: before[step] for step in (3, 4)}
    first = json.loads((dpo_run / "eval_results.json").read_text())["metrics"]
    assert json.loads((tmp_path / "eval_results.json").read_text())["metrics"] == first


@pytest.mark.parametrize(
    "flags",
    [
        {"use_peft": "true", "lora_r": 4, "lora_alpha": 8, "lora_target_modules": "q_proj,v_proj"},
        {"precompute_ref_log_probs": "true"},
    ],
    ids=["lora", "precomputed-reference"],
)
def test_dpo_reference_variants_train_and_evaluate(tiny_model: Path, tmp_path: Path, flags: dict[str, Any]) -> None:
    assert train_in_process(align_args("dpo", tiny_model, tmp_path, max_steps=2, **flags)) == 0
    document = assert_complete_run(tmp_path, "dpo", (2,))
    assert document["metrics"]["eval_reward_margin"] != 0.0
    assert (tmp_path / "model" / "adapter_model.safetensors").is_file() == ("use_peft" in flags)


@pytest.mark.parametrize("trainer", ["grpo", "reward"])
def test_lora_runs_save_an_adapter(trainer: str, tiny_model: Path, tmp_path: Path) -> None:
    from safetensors import safe_open

    lora = {"use_peft": "true", "lora_r": 4, "lora_alpha": 8, "lora_target_modules": "q_proj,v_proj"}
    assert train_in_process(align_args(trainer, tiny_model, tmp_path, max_steps=2, **lora)) == 0
    assert_complete_run(tmp_path, trainer, (2,))
    adapter = json.loads((tmp_path / "model" / "adapter_config.json").read_text())
    assert adapter["task_type"] == ("SEQ_CLS" if trainer == "reward" else "CAUSAL_LM")
    with safe_open(str(tmp_path / "model" / "adapter_model.safetensors"), "pt") as weights:
        names = set(weights.keys())
    # A reward model's score head is new: PEFT trains and saves it whole, beside the adapter.
    assert ("base_model.model.score.weight" in names) == (trainer == "reward")


@pytest.fixture(scope="module")
def grpo_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Four GRPO steps with all three reward functions, checkpoints and evaluations at 2 and 4."""
    out = tmp_path_factory.mktemp("grpo")
    metrics = "eval_mean_reward,eval_reward_format,eval_reward_length,eval_reward_exact_match"
    argv = align_args("grpo", tiny_model, out, eval_steps=2, eval_metrics=metrics)
    assert train_in_process(argv) == 0
    return out


def test_grpo_writes_the_run_outputs(grpo_run: Path) -> None:
    document = json.loads((grpo_run / "eval_results.json").read_text())
    assert set(document["metrics"]) == {
        "eval_mean_reward", "eval_reward_format", "eval_reward_length", "eval_reward_exact_match",
    }  # fmt: skip
    assert all(0.0 <= value <= 3.0 for value in document["metrics"].values())
    for step in (2, 4):
        assert missing_parts(grpo_run / f"checkpoint-{step}") == []
    train = [r["metrics"] for r in records(grpo_run, "metrics") if "loss" in r["metrics"]]
    assert [r["step"] for r in records(grpo_run, "metrics") if "loss" in r["metrics"]] == [1, 2, 3, 4]
    assert {"reward", "rewards/format_reward/mean", "rewards/exact_match_reward/mean"} <= set(train[0])
    assert [step for step, _ in eval_metrics(grpo_run)] == [2, 4, 4]


def test_grpo_stops_on_sigterm_and_resumes(tiny_model: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    argv = align_args("grpo", tiny_model, out, max_steps=50, save_steps=1000, logging_steps=1)

    def stop_after_two_steps() -> None:
        while not any(step >= 2 for step in train_losses(out / "metrics.jsonl")):
            threading.Event().wait(0.05)
        os.kill(os.getpid(), signal.SIGTERM)  # handled in the main thread, which is training

    threading.Thread(target=stop_after_two_steps, daemon=True).start()
    assert train_in_process(argv) == EXIT_STOPPED
    stopped = records(out, "results")[-1]["results"]["stopped_at_step"]
    assert 2 <= stopped < 50 and missing_parts(out / f"checkpoint-{stopped}") == []
    assert not (out / "model").exists()
    resumed = align_args("grpo", tiny_model, out, max_steps=stopped + 1, save_steps=1000, resume_from="latest")
    assert train_in_process(resumed) == 0
    assert max(train_losses(out / "metrics.jsonl")) == stopped + 1 and (out / "model").is_dir()


@pytest.mark.parametrize("trainer", ["kto", "reward", "rloo"])
def test_short_run_writes_the_run_outputs(trainer: str, tiny_model: Path, tmp_path: Path) -> None:
    assert train_in_process(align_args(trainer, tiny_model, tmp_path)) == 0
    document = assert_complete_run(tmp_path, trainer, (2, 4))
    for name, value in document["metrics"].items():
        assert value == value, name  # not NaN
        if "accuracy" in name:
            assert 0.0 <= value <= 1.0


def test_a_reward_model_is_saved_as_a_one_label_classifier(tiny_model: Path, tmp_path: Path) -> None:
    import torch
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    assert train_in_process(align_args("reward", tiny_model, tmp_path, max_steps=2)) == 0
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path / "model").eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "model")
    assert model.config.num_labels == 1 and model.config.pad_token_id == tokenizer.pad_token_id
    with torch.no_grad():
        score = model(**tokenizer(["Question: What is 1 plus 2? Answer: 1 plus 2 is 3."], return_tensors="pt")).logits
    assert score.shape == (1, 1)


@pytest.mark.parametrize(
    ("trainer", "data", "message"),
    [("dpo", TINY_CHAT, "--trainer dpo trains on columns chosen/rejected"), ("grpo", TINY_CHAT, "prompt")],
    ids=["dpo-on-chat", "grpo-on-chat"],
)
def test_data_of_another_format_is_refused_before_training(
    trainer: str, data: Path, message: str, tiny_model: Path, tmp_path: Path
) -> None:
    with pytest.raises(DatasetError, match=message):
        train_in_process(align_args(trainer, tiny_model, tmp_path, dataset_name=data))
    assert not (tmp_path / "metrics.jsonl").exists()
