"""`--base_run`: a run starts from another run's final model, found in its context and checked by digest."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from trainer.digests import write_manifest
from trainer.loading import BaseModelError, resolve_base_model


def base_folder(root: Path) -> tuple[Path, str]:
    folder = root / "artifacts" / "base-uuid" / "outputs" / "model"
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "model.safetensors").write_bytes(b"weights")
    return folder, write_manifest(folder)


def test_the_base_model_is_found_in_the_context_and_checked_against_its_digest(tmp_path: Path) -> None:
    folder, digest = base_folder(tmp_path)
    script = SimpleNamespace(base_run="base-uuid", base_model_digest=digest)
    model = SimpleNamespace(model_name_or_path="outputs/model")
    resolve_base_model(script, model, tmp_path)
    assert model.model_name_or_path == str(folder)

    (folder / "model.safetensors").write_bytes(b"other weights")
    moved = SimpleNamespace(model_name_or_path="outputs/model")
    with pytest.raises(BaseModelError, match=f"has digest sha256:[0-9a-f]{{64}}; its outputs recorded {digest}"):
        resolve_base_model(script, moved, tmp_path)
    with pytest.raises(BaseModelError, match="is not there"):
        resolve_base_model(SimpleNamespace(base_run="gone", base_model_digest=digest), moved, tmp_path)


def test_without_a_base_run_nothing_changes(tmp_path: Path) -> None:
    model = SimpleNamespace(model_name_or_path="org/model")
    resolve_base_model(SimpleNamespace(base_run="", base_model_digest=""), model, tmp_path)
    assert model.model_name_or_path == "org/model"
