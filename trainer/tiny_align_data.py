"""Small, deterministic datasets in TRL's formats for the preference and online trainers (tests, `*-tiny` recipes).

`python -m trainer.tiny_align_data OUT_DIR --kind prefs|kto|prompts` writes `OUT_DIR/train.jsonl` and
`OUT_DIR/eval.jsonl`; the same command always writes the same bytes. The shipped copies live in
`manifests/datasets/tiny-prefs`, `tiny-kto` and `tiny-prompts`. Every row comes from the question/answer
generator of `trainer.tiny_data` (arithmetic, capitals, colours, reversals, digits), seeded per kind, so the
tiny tokenizer knows the words; the eval rows come from the same stream after the train rows, keeping only
questions that no train row and no earlier eval row asks (held out: mostly sums, the other kinds are few).

- `prefs` (preference, explicit prompt, standard text): `{"prompt", "chosen", "rejected"}` with
  `prompt = "Question: <q> Answer:"`, `chosen = " <the right answer>"` and `rejected = " <ANOTHER QUESTION'S
  ANSWER, SHOUTED>"`. The learnable pattern: the chosen completion is a sentence-case sentence ending with a full stop,
  the rejected one is the answer to another question in capitals ending with "!". A random-init tiny Llama
  tells them apart within a few dozen DPO or reward-model steps (preference accuracy well above 0.5).
- `kto` (unpaired preference): train rows `{"prompt", "completion", "label"}`, half of them `label: true` with
  the chosen completion, half `label: false` with the rejected one (seeded order); the eval split holds PAIRS
  `{"prompt", "chosen", "rejected"}` as `prefs` does, because KTO is evaluated like DPO (procedure `pref-v1`).
- `prompts` (prompt-only, conversational): `{"prompt": [{"role": "user", "content": <q>}], "answer": <a>}`,
  the reference answer being tiny-chat's answer sentence (what `exact-match` compares with; it also ends with
  a full stop and is 4-6 words, so `format` and `length` reward the same style).
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

from trainer.tiny_data import chat_rows, write_jsonl

KINDS = ("prefs", "kto", "prompts")
SEEDS = {"prefs": 20240701, "kto": 20240702, "prompts": 20240703}
ROWS = {"prefs": (256, 32), "kto": (256, 32), "prompts": (128, 16)}
_STREAM = 2000  # questions drawn per kind; the held-out ones come after the train ones

Row = dict[str, Any]
QA = tuple[str, str]


def _shout(answer: str) -> str:
    return answer.rstrip(".").upper() + "!"


def question_answers(kind: str) -> tuple[list[QA], list[QA]]:
    """The (train, held-out) question/answer pairs of one kind: no held-out question is asked in training or twice."""
    train_count, eval_count = ROWS[kind]
    stream = [(row["messages"][0]["content"], row["messages"][1]["content"]) for row in chat_rows(_STREAM, SEEDS[kind])]
    train = stream[:train_count]
    seen = {question for question, _ in train}
    held_out: list[QA] = []
    for question, answer in stream[train_count:]:
        if question not in seen and len(held_out) < eval_count:
            held_out.append((question, answer))
            seen.add(question)
    return train, held_out


def preference_rows(pairs: list[QA], seed: int) -> list[Row]:
    """`{"prompt", "chosen", "rejected"}` per question: the right answer vs another question's answer, shouted."""
    rng = random.Random(seed)
    answers = sorted({answer for _, answer in pairs})
    rows: list[Row] = []
    for question, answer in pairs:
        other = rng.choice([candidate for candidate in answers if candidate != answer])
        rows.append(
            {"prompt": f"Question: {question} Answer:", "chosen": f" {answer}", "rejected": f" {_shout(other)}"}
        )
    return rows


def unpaired_rows(pairs: list[Row], seed: int) -> list[Row]:
    """One `{"prompt", "completion", "label"}` row per pair: exactly half desirable (chosen), in a seeded order."""
    labels = [index % 2 == 0 for index in range(len(pairs))]
    random.Random(seed).shuffle(labels)
    return [
        {"prompt": pair["prompt"], "completion": pair["chosen"] if label else pair["rejected"], "label": label}
        for pair, label in zip(pairs, labels, strict=True)
    ]


def prompt_rows(pairs: list[QA]) -> list[Row]:
    """Conversational prompts with their reference `answer`."""
    return [{"prompt": [{"role": "user", "content": question}], "answer": answer} for question, answer in pairs]


def build_rows(kind: str) -> tuple[list[Row], list[Row]]:
    """The (train, eval) rows of one kind."""
    train, held_out = question_answers(kind)
    seed = SEEDS[kind]
    if kind == "prompts":
        return prompt_rows(train), prompt_rows(held_out)
    train_pairs, eval_pairs = preference_rows(train, seed), preference_rows(held_out, seed + 1)
    if kind == "kto":
        return unpaired_rows(train_pairs, seed), eval_pairs
    return train_pairs, eval_pairs


def write_tiny_align(out_dir: Path, kind: str) -> tuple[Path, Path]:
    """Write one kind's train/eval splits into `out_dir` and return their paths."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; known: {', '.join(KINDS)}")
    train, held_out = build_rows(kind)
    train_path, eval_path = out_dir / "train.jsonl", out_dir / "eval.jsonl"
    write_jsonl(train_path, train)
    write_jsonl(eval_path, held_out)
    return train_path, eval_path


def main(argv: list[str] | None = None) -> None:
    """Command line: `python -m trainer.tiny_align_data OUT_DIR --kind prefs|kto|prompts`."""
    parser = argparse.ArgumentParser(prog="python -m trainer.tiny_align_data", description=__doc__)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--kind", choices=KINDS, required=True, help="which dataset to write")
    args = parser.parse_args(argv)
    for path in write_tiny_align(args.out_dir, args.kind):
        print(path)


if __name__ == "__main__":
    main()
