"""Local datasets: the shipped tiny-chat files, the data digest, split lookup."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from tests.trainer.runs import TINY_CHAT
from trainer.data import DatasetError, dataset_digest, load_split, verify_digest
from trainer.tiny_data import write_tiny_chat


def test_shipped_tiny_chat_is_what_the_generator_writes(tmp_path: Path) -> None:
    train, evaluation = write_tiny_chat(tmp_path)
    assert train.read_bytes() == (TINY_CHAT / "train.jsonl").read_bytes()
    assert evaluation.read_bytes() == (TINY_CHAT / "eval.jsonl").read_bytes()


def test_digest_follows_the_documented_algorithm(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "train.jsonl").write_text('{"text": "a"}\n')
    (tmp_path / "sub" / "eval.jsonl").write_text('{"text": "b"}\n')
    (tmp_path / "README.md").write_text("not data")
    lines = "".join(
        f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {name}\n"
        for name, p in [("sub/eval.jsonl", tmp_path / "sub" / "eval.jsonl"), ("train.jsonl", tmp_path / "train.jsonl")]
    )
    assert dataset_digest(tmp_path) == "sha256:" + hashlib.sha256(lines.encode()).hexdigest()


def test_digest_of_a_single_file_uses_its_name(tmp_path: Path) -> None:
    file = tmp_path / "rows.jsonl"
    file.write_text("{}\n")
    line = f"{hashlib.sha256(b'{}' + bytes([10])).hexdigest()}  rows.jsonl\n"
    assert dataset_digest(file) == "sha256:" + hashlib.sha256(line.encode()).hexdigest()


def test_verify_refuses_changed_data(tmp_path: Path) -> None:
    write_tiny_chat(tmp_path)
    pinned = dataset_digest(tmp_path)
    assert verify_digest(tmp_path, pinned) == pinned
    with (tmp_path / "train.jsonl").open("a") as handle:
        handle.write('{"messages": []}\n')
    with pytest.raises(DatasetError, match="the recipe pins"):
        verify_digest(tmp_path, pinned)


def test_local_folder_splits_by_file_name() -> None:
    split = load_split(str(TINY_CHAT), "main", "eval")
    assert len(split) == 32
    assert split[0]["messages"][1]["role"] == "assistant"
    with pytest.raises(DatasetError, match="splits: eval, train"):
        load_split(str(TINY_CHAT), "main", "validation")
