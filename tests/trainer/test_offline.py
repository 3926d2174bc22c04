"""A run whose model and data are all local makes no Hub request: the trainer goes offline, imported libraries too."""

from __future__ import annotations

from pathlib import Path

import datasets.config
import huggingface_hub.constants
import pytest

from trainer.loading import offline_when_local


@pytest.fixture
def online(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine without the offline switches (restored after the test)."""
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_DATASETS_OFFLINE", False)


@pytest.mark.usefixtures("online")
def test_local_model_and_data_switch_every_library_offline(tmp_path: Path) -> None:
    import os

    assert offline_when_local(str(tmp_path), str(tmp_path)) is True
    assert os.environ["HF_HUB_OFFLINE"] == "1" and os.environ["HF_DATASETS_OFFLINE"] == "1"
    assert huggingface_hub.constants.HF_HUB_OFFLINE is True and huggingface_hub.is_offline_mode()
    assert datasets.config.HF_HUB_OFFLINE is True


@pytest.mark.usefixtures("online")
def test_a_hub_model_or_dataset_keeps_the_hub_reachable(tmp_path: Path) -> None:
    import os

    assert offline_when_local("Qwen/Qwen2.5-0.5B-Instruct", str(tmp_path)) is False
    assert offline_when_local(str(tmp_path), "HuggingFaceH4/ultrafeedback_binarized") is False
    assert "HF_HUB_OFFLINE" not in os.environ and huggingface_hub.constants.HF_HUB_OFFLINE is False
