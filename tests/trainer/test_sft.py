"""Real SFT runs of the tiny model in this process: tracking records, checkpoints, eval contract, LoRA, text data."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.runs import TINY_CHAT, read_jsonl, tiny_args, train_in_process, train_losses
from trainer.checkpoints import missing_parts, read_meta
from trainer.digests import MANIFEST_FILE, file_entries, file_sha256, folder_digest, manifest_digest
from trainer.evaluation import EvalContractError, contract_hash
from trainer.run import EXIT_NO_CHECKPOINT
from trainer.tiny_data import write_tiny_text

pytestmark = pytest.mark.trainer

EVAL: dict[str, Any] = {
    "eval_dataset_name": str(TINY_CHAT),
    "eval_split": "eval",
    "eval_max_samples": 16,
    "eval_metrics": "eval_loss,eval_perplexity,eval_mean_token_accuracy",
    "eval_steps": 5,
}


@pytest.fixture(scope="module")
def full_run(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One 10-step full fine-tune with checkpoints every 5 steps and the eval contract (every 5 steps + end)."""
    out = tmp_path_factory.mktemp("full-run")
    assert train_in_process(tiny_args(tiny_model, out, **EVAL)) == 0
    return out


def records(out: Path, kind: str) -> list[dict[str, Any]]:
    """Tracking records of one kind."""
    return [r for r in read_jsonl(out / "metrics.jsonl") if r["kind"] == kind]


def test_params_are_logged_once_with_pins_and_versions(full_run: Path, tiny_model: Path) -> None:
    params = records(full_run, "params")
    assert len(params) == 1
    logged = params[0]["params"]
    assert logged["pins"]["model"] == str(tiny_model)
    assert logged["pins"]["dataset_digest"].startswith("sha256:")
    assert logged["pins"]["eval_contract_hash"].startswith("sha256:")
    assert {"torch", "transformers", "trl", "peft", "python"} <= set(logged["versions"])
    assert logged["config"]["training"]["learning_rate"] == 3e-3
    assert logged["config"]["model"]["model_name_or_path"] == str(tiny_model)


def test_every_step_logs_train_metrics(full_run: Path) -> None:
    train = [r for r in records(full_run, "metrics") if "loss" in r["metrics"]]
    assert [r["step"] for r in train] == list(range(1, 11))
    for record in train:
        assert {"loss", "learning_rate", "grad_norm", "num_tokens"} <= set(record["metrics"])
    tokens = [r["metrics"]["num_tokens"] for r in train]
    assert tokens == sorted(tokens) and tokens[0] > 0


def test_eval_runs_every_n_steps_and_at_the_end(full_run: Path) -> None:
    evals = [r for r in records(full_run, "metrics") if "eval_loss" in r["metrics"]]
    assert [r["step"] for r in evals] == [5, 10, 10]  # eval_steps=5, then the final contract evaluation
    assert any("train_runtime" in r["metrics"] for r in records(full_run, "metrics"))


def test_eval_results_carry_the_contract_hash(full_run: Path) -> None:
    document = json.loads((full_run / "eval_results.json").read_text())
    assert document["contract"]["max_samples"] == 16
    assert document["contract_hash"] == contract_hash(document["contract"])
    assert set(document["metrics"]) == {"eval_loss", "eval_perplexity", "eval_mean_token_accuracy"}
    assert document["global_step"] == 10
    results = records(full_run, "results")[-1]["results"]
    assert results["eval_contract_hash"] == document["contract_hash"]
    assert results["eval_loss"] == document["metrics"]["eval_loss"]
    artifacts = {r["name"]: Path(r["path"]) for r in records(full_run, "artifact")}
    assert artifacts == {"eval_results": full_run / "eval_results.json", "model": full_run / "model"}


def test_checkpoints_are_complete_and_marked(full_run: Path, tiny_model: Path) -> None:
    for step in (5, 10):
        checkpoint = full_run / f"checkpoint-{step}"
        assert missing_parts(checkpoint) == []
        meta = read_meta(checkpoint)
        assert meta is not None
        assert meta.global_step == step and meta.model_name_or_path == str(tiny_model)


def test_checkpoints_carry_a_manifest_of_their_content(full_run: Path, tmp_path: Path) -> None:
    for step in (5, 10):
        checkpoint = full_run / f"checkpoint-{step}"
        manifest = json.loads((checkpoint / MANIFEST_FILE).read_text())
        assert manifest["digest"] == folder_digest(file_entries(checkpoint))
        assert "model.safetensors" in {f["path"] for f in manifest["files"]}
    copy = tmp_path / "checkpoint-5"
    shutil.copytree(full_run / "checkpoint-5", copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0x01
    weights.write_bytes(bytes(data))
    assert folder_digest(file_entries(copy)) != manifest_digest(full_run / "checkpoint-5")


def test_checkpoint_model_and_eval_digests_are_outputs(full_run: Path) -> None:
    outputs: dict[str, Any] = {}
    for record in records(full_run, "outputs"):
        outputs.update(record["outputs"])
    assert outputs["checkpoint_digests"] == {
        name: manifest_digest(full_run / name) for name in ("checkpoint-5", "checkpoint-10")
    }
    model = full_run / "model"
    entries = file_entries(model)
    assert outputs["model_digest"] == manifest_digest(model) == folder_digest(entries)
    assert outputs["model_files"] == len(entries) and "tokenizer.json" in {e["path"] for e in entries}
    assert outputs["model_size_bytes"] == sum(e["size"] for e in entries)
    assert outputs["eval_results_digest"] == "sha256:" + file_sha256(full_run / "eval_results.json")


def test_final_model_loads_by_path(full_run: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(full_run / "model")
    tokenizer = AutoTokenizer.from_pretrained(full_run / "model")
    assert model.config.vocab_size >= len(tokenizer)
    assert tokenizer.chat_template


def test_same_recipe_same_losses(full_run: Path, tiny_model: Path, tmp_path: Path) -> None:
    assert train_in_process(tiny_args(tiny_model, tmp_path, **EVAL)) == 0
    assert train_losses(tmp_path / "metrics.jsonl") == train_losses(full_run / "metrics.jsonl")
    first = json.loads((full_run / "eval_results.json").read_text())["metrics"]
    again = json.loads((tmp_path / "eval_results.json").read_text())["metrics"]
    assert again == first


def test_lora_on_plain_text(tiny_model: Path, tmp_path: Path) -> None:
    data = tmp_path / "text"
    write_tiny_text(data)
    out = tmp_path / "out"
    argv = tiny_args(
        tiny_model,
        out,
        data=data,
        max_steps=4,
        save_steps=4,
        use_peft="true",
        lora_r=4,
        lora_alpha=8,
        lora_target_modules="q_proj,v_proj",
        assistant_only_loss="false",
        dataset_text_field="text",
    )
    assert train_in_process(argv) == 0
    assert (out / "model" / "adapter_model.safetensors").is_file()
    adapter = json.loads((out / "model" / "adapter_config.json").read_text())
    assert sorted(adapter["target_modules"]) == ["q_proj", "v_proj"]
    assert missing_parts(out / "checkpoint-4") == []
    assert len(train_losses(out / "metrics.jsonl")) == 4


def test_resume_refuses_a_checkpoint_of_another_recipe(
    full_run: Path, tiny_model: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    shutil.copytree(full_run / "checkpoint-10", tmp_path / "checkpoint-10")  # what Polyaxon's copy does
    argv = tiny_args(tiny_model, tmp_path, resume_from="checkpoint-10", recipe_hash="another-recipe")
    assert train_in_process(argv) == EXIT_NO_CHECKPOINT
    assert "recipe hash" in caplog.text
    assert not (tmp_path / "metrics.jsonl").exists() and not (tmp_path / "model").exists()


def test_a_changed_eval_contract_is_refused(tiny_model: Path, tmp_path: Path) -> None:
    argv = tiny_args(tiny_model, tmp_path, **EVAL, eval_contract_hash="sha256:" + "0" * 64)
    with pytest.raises(EvalContractError, match="the recipe pins"):
        train_in_process(argv)
