"""The tiny preference, KTO and prompt datasets: TRL's formats, determinism, the shipped copies, the pattern."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.trainer.runs import REPO, TINY_KTO, TINY_PREFS, TINY_PROMPTS
from trainer.tiny_align_data import KINDS, write_tiny_align

SHIPPED = {"prefs": TINY_PREFS, "kto": TINY_KTO, "prompts": TINY_PROMPTS}


def rows(path: Path) -> list[dict[str, Any]]:
    """The JSON rows of one split file."""
    return [json.loads(line) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("kind", KINDS)
def test_building_twice_gives_the_same_bytes_as_the_shipped_copy(kind: str, tmp_path: Path) -> None:
    first = write_tiny_align(tmp_path / "a", kind)
    second = write_tiny_align(tmp_path / "b", kind)
    for one, two, name in zip(first, second, ("train.jsonl", "eval.jsonl"), strict=True):
        assert one.read_bytes() == two.read_bytes() == (SHIPPED[kind] / name).read_bytes()
        assert one.stat().st_size < 64_000


def test_the_builder_runs_from_the_command_line(tmp_path: Path) -> None:
    command = [sys.executable, "-m", "trainer.tiny_align_data", str(tmp_path), "--kind", "prompts"]
    subprocess.run(command, cwd=REPO, check=True, capture_output=True)
    assert (tmp_path / "eval.jsonl").read_bytes() == (TINY_PROMPTS / "eval.jsonl").read_bytes()


def assert_pairs(pairs: list[dict[str, Any]]) -> None:
    """Standard-text pairs with an explicit prompt, following the documented pattern."""
    for pair in pairs:
        assert set(pair) == {"prompt", "chosen", "rejected"}
        assert pair["prompt"].startswith("Question: ") and pair["prompt"].endswith(" Answer:")
        assert pair["chosen"].startswith(" ") and pair["chosen"].endswith(".") and not pair["chosen"].isupper()
        assert pair["rejected"].startswith(" ") and pair["rejected"].endswith("!") and pair["rejected"].isupper()


def test_prefs_are_pairs_with_the_learnable_pattern() -> None:
    train, held_out = rows(TINY_PREFS / "train.jsonl"), rows(TINY_PREFS / "eval.jsonl")
    assert (len(train), len(held_out)) == (256, 32)
    assert_pairs(train + held_out)


def test_kto_trains_on_balanced_unpaired_rows_and_evaluates_on_pairs() -> None:
    train, held_out = rows(TINY_KTO / "train.jsonl"), rows(TINY_KTO / "eval.jsonl")
    assert all(set(row) == {"prompt", "completion", "label"} for row in train)
    labels = [row["label"] for row in train]
    assert labels.count(True) == labels.count(False) == 128
    assert labels[:8] != [True, False] * 4  # a seeded order, not an alternation
    assert all(row["completion"].endswith(".") == row["label"] for row in train)
    assert_pairs(held_out)


def test_prompts_are_conversational_with_a_reference_answer() -> None:
    train, held_out = rows(TINY_PROMPTS / "train.jsonl"), rows(TINY_PROMPTS / "eval.jsonl")
    assert (len(train), len(held_out)) == (128, 16)
    for row in train + held_out:
        assert set(row) == {"prompt", "answer"}
        [message] = row["prompt"]
        assert message["role"] == "user" and message["content"]
        assert row["answer"].endswith(".")
    assert {row["prompt"][0]["content"] for row in held_out} - {row["prompt"][0]["content"] for row in train}


def test_eval_rows_are_held_out_of_the_training_rows() -> None:
    train = {json.dumps(row, sort_keys=True) for row in rows(TINY_PREFS / "train.jsonl")}
    assert not train & {json.dumps(row, sort_keys=True) for row in rows(TINY_PREFS / "eval.jsonl")}
