"""Trainer test fixtures: the tiny model, built once per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest


@pytest.fixture(scope="session", autouse=True)
def offline_env() -> Iterator[None]:
    """Keep every trainer test off the hub and out of any Polyaxon run."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("HF_HUB_OFFLINE", "1")
        mp.setenv("HF_DATASETS_OFFLINE", "1")
        mp.setenv("POLYAXON_NO_CONFIG", "true")
        mp.delenv("POLYAXON_RUN_INSTANCE", raising=False)
        yield


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Llama + tokenizer folder (`python -m trainer.tiny_model`), built once per session."""
    from trainer.tiny_model import build_tiny_model

    return build_tiny_model(tmp_path_factory.mktemp("tiny-llama"))
