"""Two tiny lm-evaluation-harness tasks built from tiny-chat's questions, for tests and the tiny harness recipes.

`python -m trainer.tiny_eval_tasks OUT_DIR` writes one folder per task, each holding exactly `task.yaml` and its
data file `test.jsonl` (what a harness contract pins by folder digest, see `trainer.harness`):

* `tiny_capitals` (multiple choice, `acc` and `acc_norm`): "What is the capital of X?" with four full assistant
  answers "The capital of X is Y." (the right city and three others), `answer` the right one's index.
* `tiny_arith` (generate_until, `exact_match` ignoring case and punctuation, greedy, at most 16 new tokens, stops
  at a newline): "What is a plus b?" -> "a plus b is c.".

The rows come from a seeded generator, so the same command always writes the same bytes; the shipped copy lives in
`manifests/evals/tasks/`. The YAML names its data relative to the task folder (`data_files.test: test.jsonl`);
the trainer rewrites that to the verified file's absolute path when it runs the task.
"""

from __future__ import annotations

import argparse
import random
from pathlib import Path
from typing import Any

from trainer.tiny_data import CAPITALS, write_jsonl

SEED = 20261206
ARITH_DOCS = 16
WRONG_CHOICES = 3

CAPITALS_YAML = """\
# Multiple choice: which full answer to "What is the capital of X?" is right (tiny-chat's capitals).
task: tiny_capitals
dataset_path: json
dataset_kwargs:
  data_files:
    test: test.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{question}}"
doc_to_choice: "{{choices}}"
doc_to_target: "{{answer}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""

ARITH_YAML = """\
# Generation: "What is a plus b?" answered "a plus b is c." (tiny-chat's arithmetic), greedy.
task: tiny_arith
dataset_path: json
dataset_kwargs:
  data_files:
    test: test.jsonl
test_split: test
output_type: generate_until
doc_to_text: "{{question}}"
doc_to_target: "{{answer}}"
generation_kwargs:
  until: ["\\n"]
  do_sample: false
  max_gen_toks: 16
metric_list:
  - metric: exact_match
    aggregation: mean
    higher_is_better: true
    ignore_case: true
    ignore_punctuation: true
metadata:
  version: 1.0
"""


def capitals_docs(seed: int = SEED) -> list[dict[str, Any]]:
    """One multiple-choice doc per tiny-chat capital: the right answer among three others, at a seeded position."""
    rng = random.Random(seed)
    cities = [city for _, city in CAPITALS]
    docs = []
    for country, city in CAPITALS:
        wrong = rng.sample([other for other in cities if other != city], WRONG_CHOICES)
        options = [city, *wrong]
        rng.shuffle(options)
        docs.append(
            {
                "question": f"What is the capital of {country}?",
                "choices": [f"The capital of {country} is {option}." for option in options],
                "answer": options.index(city),
            }
        )
    return docs


def arith_docs(count: int = ARITH_DOCS, seed: int = SEED) -> list[dict[str, Any]]:
    """`count` distinct seeded sums of two digits, asked and answered as tiny-chat does."""
    rng = random.Random(seed + 1)
    pairs = rng.sample([(a, b) for a in range(10) for b in range(10)], count)
    return [{"question": f"What is {a} plus {b}?", "answer": f"{a} plus {b} is {a + b}."} for a, b in pairs]


def write_tasks(out_dir: Path) -> list[Path]:
    """Write the `tiny_capitals` and `tiny_arith` task folders into `out_dir`; return the folders."""
    folders = []
    for name, yaml_text, docs in (
        ("tiny_capitals", CAPITALS_YAML, capitals_docs()),
        ("tiny_arith", ARITH_YAML, arith_docs()),
    ):
        folder = out_dir / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "task.yaml").write_text(yaml_text, encoding="utf-8", newline="\n")
        write_jsonl(folder / "test.jsonl", docs)
        folders.append(folder)
    return folders


def main(argv: list[str] | None = None) -> None:
    """Command line: `python -m trainer.tiny_eval_tasks OUT_DIR`."""
    parser = argparse.ArgumentParser(prog="python -m trainer.tiny_eval_tasks", description=__doc__)
    parser.add_argument("out_dir", type=Path)
    args = parser.parse_args(argv)
    for folder in write_tasks(args.out_dir):
        print(folder)


if __name__ == "__main__":
    main()
