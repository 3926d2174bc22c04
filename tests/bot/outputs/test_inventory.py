"""Judging a run's outputs as read back: digests (the contract shared with the trainer), completeness, confirmation."""

from __future__ import annotations

import hashlib
from pathlib import Path

from bot.outputs.inventory import (
    EvalCheck,
    FileEntry,
    FolderCheck,
    OutputsReport,
    folder_digest,
    group_folders,
    listed,
    manifest_changes,
    metadata_missing,
)
from trainer import digests as trainer_digests


def entries_of(folder: Path) -> list[FileEntry]:
    found = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and listed(rel):
            found.append(FileEntry(rel, path.stat().st_size, hashlib.sha256(path.read_bytes()).hexdigest()))
    return found


def test_the_bot_and_the_trainer_compute_one_folder_digest(tmp_path: Path) -> None:
    folder = tmp_path / "checkpoint-20"
    (folder / "sub").mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"\x00\x01weights" * 1000)
    (folder / "config.json").write_text('{"a": 1}')
    (folder / "sub" / "ünïcode name.txt").write_text("x")
    (folder / ".tmp-write").write_text("ignored")
    written = trainer_digests.write_manifest(folder)
    (folder / "finetune_checkpoint.json").write_text("{}")  # the marker comes after the manifest, unlisted
    assert folder_digest(entries_of(folder)) == written
    (folder / "model.safetensors").write_bytes(b"\x00\x02weights" * 1000)  # same size, one byte changed
    assert folder_digest(entries_of(folder)) != written


def test_metadata_missing_names_each_part() -> None:
    full = {"config.json", "model.safetensors", "tokenizer.json", "trainer_state.json", "finetune_checkpoint.json"}
    assert metadata_missing(full, checkpoint=True) == []
    assert (
        metadata_missing(
            {"adapter_config.json", "adapter_model.safetensors", "tokenizer_config.json"}, checkpoint=False
        )
        == []
    )
    missing = metadata_missing({"model.safetensors"}, checkpoint=True)
    assert [m.split(" ")[0] for m in missing] == ["config", "tokenizer", "trainer", "completion"]


def test_manifest_changes_finds_changed_gone_and_extra_files() -> None:
    manifest = {"files": [{"path": "a", "size": 1, "sha256": "aa"}, {"path": "b", "size": 2, "sha256": "bb"}]}
    found = {"a": FileEntry("a", 1, "zz"), "c": FileEntry("c", 3, "cc")}
    assert manifest_changes(manifest, found) == ["a", "b (gone)", "c (not in manifest)"]
    # Checked by size only (over the hash budget): a same-size change is not seen, a size change is.
    assert manifest_changes(manifest, {"a": FileEntry("a", 1, ""), "b": FileEntry("b", 5, "")}) == ["b"]


def test_group_folders_splits_checkpoints_and_the_model() -> None:
    folders = group_folders(
        [("outputs/checkpoint-20/model.safetensors", 10), ("outputs/model/config.json", 2), ("outputs/x.json", 1)]
    )
    assert folders == {"checkpoint-20": [("model.safetensors", 10)], "model": [("config.json", 2)]}


def _model(digest: str = "sha256:aa") -> FolderCheck:
    return FolderCheck(
        name="model",
        path="outputs/model",
        step=None,
        size=3,
        files=3,
        recorded_digest=digest,
        store_digest=digest,
        manifest_digest=digest,
        hashed=True,
    )


def test_confirmed_needs_success_a_checked_model_and_matching_eval_results() -> None:
    good_eval = EvalCheck(present=True, contract_hash="sha256:c", expected_contract_hash="sha256:c")
    report = OutputsReport("r", "succeeded", [], _model(), good_eval, log_bytes=10)
    assert report.confirmed and report.summary()["confirmed"]
    assert not OutputsReport("r", "failed", [], _model(), good_eval, 10).confirmed
    tampered = _model()
    tampered.store_digest = "sha256:bb"
    bad = OutputsReport("r", "succeeded", [], tampered, good_eval, 10)
    assert not bad.confirmed and "model: content differs from the recorded digest" in bad.problems[0]
    other_contract = EvalCheck(present=True, contract_hash="sha256:x", expected_contract_hash="sha256:c")
    assert not OutputsReport("r", "succeeded", [], _model(), other_contract, 10).confirmed
    no_eval = EvalCheck(present=False, expected_contract_hash="sha256:c")
    assert "no eval_results.json" in OutputsReport("r", "succeeded", [], _model(), no_eval, 10).problems[0]


def test_a_partial_checkpoint_is_reported_not_hidden() -> None:
    partial = FolderCheck(
        name="checkpoint-40",
        path="outputs/checkpoint-40",
        step=40,
        size=5,
        files=2,
        missing=["trainer state (trainer_state.json)"],
        recorded_digest=None,
    )
    assert not partial.complete
    assert partial.problems == ["missing trainer state (trainer_state.json)", "no digest recorded by the trainer"]
