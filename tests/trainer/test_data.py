"""Local datasets: the shipped tiny-chat files, the data digest, split lookup."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from tests.trainer.runs import TINY_CHAT
from trainer.data import DatasetError, DatasetRowError, dataset_digest, load_split, verify_digest
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


def test_every_row_is_checked_before_training_and_a_bad_one_is_a_data_error_naming_its_line(tmp_path: Path) -> None:
    folder = tmp_path / "team-qa"
    folder.mkdir()
    rows = [json.dumps({"prompt": f"q{i}", "completion": "a"}) for i in range(12)]
    rows[9] = '{"prompt": "only a prompt"}'
    (folder / "train.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    with pytest.raises(DatasetRowError) as info:
        load_split(str(folder), "", "train")
    said = str(info.value)
    assert f'{folder}/train.jsonl:10: a prompt_completion row needs "completion" (a string)' in said, said
    # The bot reads it as the data's fault, not the code's (what the job's traceback ends with).
    from bot.failures import classify

    failure = classify([], ["Traceback (most recent call last):", f"trainer.data.DatasetRowError: {said}"])
    assert failure.kind == "data", failure


def test_a_line_that_is_not_json_is_named_before_datasets_reads_the_file(tmp_path: Path) -> None:
    file = tmp_path / "train.jsonl"
    file.write_text('{"prompt": "q", "completion": "a"}\n{"prompt": "x", "completion": \n', encoding="utf-8")
    with pytest.raises(DatasetRowError, match=r"train\.jsonl:2:31: not JSON"):
        load_split(str(file), "", "train")
