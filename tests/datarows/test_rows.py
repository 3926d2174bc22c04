"""Every row in its TRL format: one row's check (shared by the catalog and the trainer) and whole files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from datarows import SHOWN, DataFormat, check_file, row_problem, rows_problems

PC = DataFormat("prompt_completion")
USER = {"role": "user", "content": "What is 2+2?"}
ASSISTANT = {"role": "assistant", "content": "4"}

ROWS: list[tuple[str, dict[str, Any], DataFormat, str | None]] = [
    ("a prompt and its completion", {"prompt": "q", "completion": "a"}, PC, None),
    ("extra columns ride along", {"prompt": "q", "completion": "a", "answer": "4"}, PC, None),
    (
        "a completion missing",
        {"prompt": "only a prompt"},
        PC,
        'a prompt_completion row needs "completion" (a string); the row has only "prompt"',
    ),
    ("a null completion", {"prompt": "q", "completion": None}, PC, 'needs "completion" (a string)'),
    ("a number for a string", {"prompt": 3, "completion": "a"}, PC, "'prompt' must be a string, not a number"),
    ("an empty completion", {"prompt": "q", "completion": "  "}, PC, "'completion' is empty"),
    ("text", {"text": "hello"}, DataFormat("language_modeling"), None),
    ("chat", {"messages": [USER, ASSISTANT]}, DataFormat("language_modeling", True), None),
    (
        "a chat with nothing to learn",
        {"messages": [USER]},
        DataFormat("language_modeling", True),
        "needs an assistant message",
    ),
    (
        "an unknown role",
        {"messages": [{"role": "bot", "content": "x"}, ASSISTANT]},
        DataFormat("language_modeling", True),
        "message 1 has role 'bot'",
    ),
    (
        "two user turns",
        {"messages": [USER, USER, ASSISTANT]},
        DataFormat("language_modeling", True),
        "two user messages in a row",
    ),
    ("a chat prompt", {"prompt": [USER]}, DataFormat("prompt_only", True), None),
    (
        "a chat prompt that already answers",
        {"prompt": [USER, ASSISTANT]},
        DataFormat("prompt_only", True),
        "must end with a user message",
    ),
    ("a pair", {"prompt": "q", "chosen": "a", "rejected": "b"}, DataFormat("preference"), None),
    (
        "half a pair",
        {"prompt": "q", "chosen": "a"},
        DataFormat("preference"),
        'needs "rejected" (a string); the row has only "prompt", "chosen"',
    ),
    (
        "a chat pair whose answer is the user's",
        {"prompt": [USER], "chosen": [USER], "rejected": [ASSISTANT]},
        DataFormat("preference", True),
        "'chosen' must hold only assistant messages",
    ),
    ("a KTO row", {"prompt": "q", "completion": "a", "label": True}, DataFormat("unpaired_preference"), None),
    (
        "a KTO label as text",
        {"prompt": "q", "completion": "a", "label": "true"},
        DataFormat("unpaired_preference"),
        "'label' must be true or false, not a string",
    ),
]


@pytest.mark.parametrize(("row", "fmt", "expected"), [r[1:] for r in ROWS], ids=[r[0] for r in ROWS])
def test_each_row_is_checked_in_its_format(row: dict[str, Any], fmt: DataFormat, expected: str | None) -> None:
    said = row_problem(row, fmt)
    if expected is None:
        assert said is None, said
    else:
        assert said is not None and expected in said, said


def test_a_file_names_each_bad_line_and_the_column_of_json_that_is_not(tmp_path: Path) -> None:
    good = '{"prompt": "q", "completion": "a"}'
    lines = [good] * 9 + ['{"prompt": "only a prompt"}', "", '{"prompt": "x", "completion": ', "[1, 2]", good]
    file = tmp_path / "train.jsonl"
    file.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = check_file(file, PC)
    assert report.rows == 13 and report.problem_count == 3  # the blank line is no row
    assert report.describe("datasets/team-qa/train.jsonl") == [
        'datasets/team-qa/train.jsonl:10: a prompt_completion row needs "completion" (a string); the row has only '
        '"prompt"',
        "datasets/team-qa/train.jsonl:12:31: not JSON: unexpected end of data",
        "datasets/team-qa/train.jsonl:13: a row is a JSON object; this line is a list",
    ]


def test_the_first_problems_are_listed_and_the_rest_counted(tmp_path: Path) -> None:
    file = tmp_path / "train.jsonl"
    file.write_text('{"prompt": "q"}\n' * 40, encoding="utf-8")
    report = check_file(file, PC)
    said = report.describe("train.jsonl")
    assert len(said) == SHOWN + 1 and said[-1] == f"train.jsonl: … and {40 - SHOWN} more rows like these"


def test_an_empty_file_is_said_so_and_a_json_list_is_read_as_rows(tmp_path: Path) -> None:
    empty = tmp_path / "eval.jsonl"
    empty.write_text("\n\n", encoding="utf-8")
    assert check_file(empty, PC).describe("eval.jsonl") == ["eval.jsonl: has no rows"]
    listed = tmp_path / "train.json"
    listed.write_text('[{"prompt": "q", "completion": "a"}, {"prompt": "q"}]', encoding="utf-8")
    assert [p.line for p in check_file(listed, PC).problems] == [2]


def test_without_a_declared_format_the_first_row_decides(tmp_path: Path) -> None:
    file = tmp_path / "train.jsonl"
    file.write_text('{"prompt": "q", "completion": "a"}\n{"prompt": "q", "chosen": "a"}\n', encoding="utf-8")
    report = check_file(file)
    assert report.found == PC and [p.line for p in report.problems] == [2]


def test_rows_already_loaded_are_numbered_from_one() -> None:
    problems, count, rows = rows_problems([{"prompt": "q", "completion": "a"}, {"prompt": "q"}], PC)
    assert (count, rows) == (1, 2) and problems[0].line == 2
