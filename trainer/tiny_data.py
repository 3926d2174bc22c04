"""A small, deterministic chat dataset for tests and the `sft-tiny` recipe.

`python -m trainer.tiny_data OUT_DIR` writes `OUT_DIR/train.jsonl` and `OUT_DIR/eval.jsonl`, one
`{"messages": [{"role": "user", ...}, {"role": "assistant", ...}]}` row per line. The rows come from
a seeded generator (arithmetic, colours, capitals, reversals), so the same command always writes the
same bytes; the shipped copy lives in `manifests/datasets/tiny-chat/`.
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path
from typing import Any

TRAIN_ROWS = 256
EVAL_ROWS = 32
SEED = 20240601

CAPITALS = [
    ("France", "Paris"),
    ("Italy", "Rome"),
    ("Spain", "Madrid"),
    ("Germany", "Berlin"),
    ("Japan", "Tokyo"),
    ("Canada", "Ottawa"),
    ("Egypt", "Cairo"),
    ("Peru", "Lima"),
    ("Kenya", "Nairobi"),
    ("Norway", "Oslo"),
    ("Chile", "Santiago"),
    ("Greece", "Athens"),
]
_COLOURS = [
    ("the sky on a clear day", "blue"),
    ("fresh grass", "green"),
    ("a ripe banana", "yellow"),
    ("snow", "white"),
    ("coal", "black"),
    ("a ripe tomato", "red"),
    ("an orange", "orange"),
]
_WORDS = ["cat", "lamp", "river", "stone", "cloud", "apple", "train", "music", "paper", "garden"]
_NUMBER_WORDS = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]

Message = dict[str, str]
Row = dict[str, list[Message]]


def _pair(rng: random.Random) -> tuple[str, str]:
    kind = rng.randrange(5)
    if kind == 0:
        a, b = rng.randrange(10), rng.randrange(10)
        return f"What is {a} plus {b}?", f"{a} plus {b} is {a + b}."
    if kind == 1:
        country, city = rng.choice(CAPITALS)
        return f"What is the capital of {country}?", f"The capital of {country} is {city}."
    if kind == 2:
        thing, colour = rng.choice(_COLOURS)
        return f"What colour is {thing}?", f"{thing.capitalize()} is {colour}."
    if kind == 3:
        word = rng.choice(_WORDS)
        return f"Spell {word} backwards.", f"{word} backwards is {word[::-1]}."
    digit = rng.randrange(10)
    return f"Write the digit {digit} as a word.", f"The digit {digit} is written {_NUMBER_WORDS[digit]}."


def chat_rows(count: int, seed: int = SEED) -> list[Row]:
    """Return `count` deterministic single-turn chat rows."""
    rng = random.Random(seed)
    rows: list[Row] = []
    for _ in range(count):
        question, answer = _pair(rng)
        rows.append({"messages": [{"role": "user", "content": question}, {"role": "assistant", "content": answer}]})
    return rows


def text_rows(count: int, seed: int = SEED) -> list[dict[str, str]]:
    """Return `count` deterministic plain-text rows (`{"text": ...}`) built from the same generator."""
    return [
        {"text": f"Question: {row['messages'][0]['content']} Answer: {row['messages'][1]['content']}"}
        for row in chat_rows(count, seed)
    ]


def write_jsonl(path: Path, rows: list[Any]) -> None:
    """Write rows as JSON lines with stable key order and separators."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n")


def write_tiny_chat(out_dir: Path) -> tuple[Path, Path]:
    """Write the tiny chat train/eval splits into `out_dir` and return their paths."""
    # One stream, split afterwards, so eval rows never depend on the train row count's seed state.
    rows = chat_rows(TRAIN_ROWS + EVAL_ROWS)
    train_path, eval_path = out_dir / "train.jsonl", out_dir / "eval.jsonl"
    write_jsonl(train_path, rows[:TRAIN_ROWS])
    write_jsonl(eval_path, rows[TRAIN_ROWS:])
    return train_path, eval_path


def write_tiny_text(out_dir: Path) -> tuple[Path, Path]:
    """Write a plain-text variant (`text` column) of the tiny dataset into `out_dir`."""
    rows = text_rows(TRAIN_ROWS + EVAL_ROWS)
    train_path, eval_path = out_dir / "train.jsonl", out_dir / "eval.jsonl"
    write_jsonl(train_path, rows[:TRAIN_ROWS])
    write_jsonl(eval_path, rows[TRAIN_ROWS:])
    return train_path, eval_path


def main(argv: list[str] | None = None) -> None:
    """Command line: `python -m trainer.tiny_data OUT_DIR [--text]`."""
    parser = argparse.ArgumentParser(prog="python -m trainer.tiny_data", description=__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--text", action="store_true", help="write the plain-text variant instead of chat rows")
    args = parser.parse_args(argv)
    paths = write_tiny_text(args.out_dir) if args.text else write_tiny_chat(args.out_dir)
    for path in paths:
        print(path)


if __name__ == "__main__":
    main()
