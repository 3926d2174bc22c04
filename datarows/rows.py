"""Every row of a dataset in its TRL format: what one row must hold, and a whole JSONL file read and checked.

One row's check (`row_problem`) is what the catalog runs on a team's local files when it loads them and what the
trainer runs on every row before its first step (a hub dataset is read only there), so both say the same thing
in the same words: `a prompt_completion row needs "completion" (a string); the row has only "prompt"`.

Files are read as bytes and parsed with orjson, line by line (a 1 GB file: `bench/rows.py`); a line that is not
JSON is named with its line and column.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson

from datarows.formats import CONVERSATIONAL_TEXT, DataFormat, detect_format

ROLES = frozenset({"system", "user", "assistant", "tool"})
# Columns that hold the answer to a prompt (assistant messages only, when conversational).
ANSWERS = frozenset({"completion", "chosen", "rejected"})
# The first problems of a file are listed; the rest are counted.
SHOWN = 5


@dataclass(frozen=True)
class RowProblem:
    """What is wrong with one line of a file (or one row of a split): where, and what was expected."""

    line: int
    message: str
    column: int | None = None

    def where(self, file: str) -> str:
        """`FILE:LINE` (`:COLUMN` for JSON) and the message."""
        at = f"{file}:{self.line}" + (f":{self.column}" if self.column is not None else "")
        return f"{at}: {self.message}"


@dataclass
class SplitReport:
    """One split file read whole: its rows, the first problems and how many there were in all."""

    rows: int = 0
    problems: list[RowProblem] = field(default_factory=list)
    problem_count: int = 0
    columns: tuple[str, ...] = ()
    found: DataFormat | None = None  # the format the first row makes (what the file is, when it was not declared)
    bytes: int = 0  # of its rows, as written: their mean says how long a row is (an estimate's tokens per row)

    @property
    def mean_row_bytes(self) -> float | None:
        """The mean size of a row, in bytes of JSON; None without rows."""
        return self.bytes / self.rows if self.rows else None

    def add(self, problem: RowProblem) -> None:
        """Count a problem; keep it when it is one of the first `SHOWN`."""
        self.problem_count += 1
        if len(self.problems) < SHOWN:
            self.problems.append(problem)

    @property
    def ok(self) -> bool:
        """No problem, and at least one row."""
        return self.problem_count == 0 and self.rows > 0

    def describe(self, file: str) -> list[str]:
        """Each shown problem as `FILE:LINE: …`, then how many more there were."""
        lines = [problem.where(file) for problem in self.problems]
        if self.problem_count > len(self.problems):
            lines.append(f"{file}: … and {self.problem_count - len(self.problems)} more rows like these")
        if self.rows == 0 and not self.problems:
            lines.append(f"{file}: has no rows")
        return lines


def check_file(path: Path, expected: DataFormat | None = None) -> SplitReport:
    """Every line of a `.jsonl` file (or every element of a `.json` list) checked against `expected`, else against
    the format its first row makes."""
    report = SplitReport()
    for line, row, problem, size in _rows(path):
        report.bytes += size
        if problem is not None:
            report.rows += 1
            report.add(problem)
            continue
        report.rows += 1
        if not isinstance(row, dict):
            report.add(RowProblem(line, f"a row is a JSON object; this line is {_kind(row)}"))
            continue
        if not report.columns:  # the first row says what the file is
            report.columns = tuple(row)
            report.found = detect_format(row, row)
        wanted = expected or report.found
        said = row_problem(row, wanted) if wanted is not None else _no_format(row)
        if said is not None:
            report.add(RowProblem(line, said))
    return report


def row_problem(row: Mapping[str, Any], fmt: DataFormat) -> str | None:
    """Why `row` is not a row of `fmt` (its fields, their types, chat roles, complete pairs), or None when it is."""
    for column in fmt.columns:
        value = row.get(column)
        if value is None:
            return _needs(fmt, column, row)
        said = _value_problem(fmt, column, value)
        if said is not None:
            return f"a {fmt.name} row's {column!r} {said}"
    return None


def rows_problems(rows: Iterable[Mapping[str, Any]], fmt: DataFormat) -> tuple[list[RowProblem], int, int]:
    """Rows already loaded (a hub split in the job): the first problems (numbered by row, from 1), their number
    and the number of rows."""
    report = SplitReport()
    for index, row in enumerate(rows, start=1):
        report.rows += 1
        said = row_problem(row, fmt) if isinstance(row, Mapping) else f"a row is an object; this one is {_kind(row)}"
        if said is not None:
            report.add(RowProblem(index, said))
    return report.problems, report.problem_count, report.rows


def _needs(fmt: DataFormat, column: str, row: Mapping[str, Any]) -> str:
    what = _what(fmt, column)
    has = [name for name in row if row.get(name) is not None]
    has_text = "only " + ", ".join(f'"{name}"' for name in has) if has else "no fields"
    if len(has) > 3:
        has_text = "fields " + ", ".join(f'"{name}"' for name in has)
    return f'a {fmt.name} row needs "{column}" ({what}); the row has {has_text}'


def _what(fmt: DataFormat, column: str) -> str:
    if column == "label":
        return "true or false"
    if fmt.conversational or column == CONVERSATIONAL_TEXT:
        return "a list of messages"
    return "a string"


def _value_problem(fmt: DataFormat, column: str, value: Any) -> str | None:
    if column == "label":
        return None if isinstance(value, bool) else f"must be true or false, not {_kind(value)}"
    if fmt.conversational or column == CONVERSATIONAL_TEXT:
        if not isinstance(value, list) or not value:
            return f"must be a non-empty list of messages, not {_kind(value)}"
        return _messages_problem(value, fmt, column)
    if not isinstance(value, str):
        return f"must be a string, not {_kind(value)}"
    if not value.strip():
        return "is empty"
    return None


def _messages_problem(messages: list[Any], fmt: DataFormat, column: str) -> str | None:
    for index, message in enumerate(messages, start=1):
        if not isinstance(message, dict):
            return f"message {index} must be an object with role and content, not {_kind(message)}"
        role = message.get("role")
        if role not in ROLES:
            return f"message {index} has role {role!r}; roles are {', '.join(sorted(ROLES))}"
        if not isinstance(message.get("content"), str) and not isinstance(message.get("content"), list):
            return f"message {index} ({role}) needs content (a string)"
    roles = [str(m["role"]) for m in messages if m["role"] != "system"]
    if column == "prompt":
        # A prompt is what the model answers: it ends with the user's turn.
        if roles and roles[-1] != "user":
            return f"must end with a user message (it ends with {roles[-1]})"
    elif column in ANSWERS and fmt.name != "implicit_preference":
        if any(role != "assistant" for role in roles):
            return "must hold only assistant messages (the answer to the prompt)"
    elif not any(role == "assistant" for role in roles):
        return "needs an assistant message to learn from"
    for previous, current in itertools.pairwise(roles):
        if previous == current and previous in {"user", "assistant"} and column not in ANSWERS:
            return f"has two {current} messages in a row (roles alternate user, assistant)"
    return None


def _no_format(row: Mapping[str, Any]) -> str:
    return f"its fields ({', '.join(sorted(row)) or 'none'}) make no TRL format"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _rows(path: Path) -> Iterator[tuple[int, Any, RowProblem | None, int]]:
    """(line, row, problem, bytes) for each non-blank line of a `.jsonl` file, or each element of a `.json` list."""
    if path.suffix == ".json":
        data = path.read_bytes()
        try:
            document = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            yield exc.lineno, None, RowProblem(exc.lineno, f"not JSON: {exc.msg}", exc.colno), len(data)
            return
        if not isinstance(document, list):
            problem = RowProblem(1, f"a .json dataset is a list of rows; this file holds {_kind(document)}")
            yield 1, None, problem, len(data)
            return
        share = len(data) // max(1, len(document))
        for index, row in enumerate(document, start=1):
            yield index, row, None, share
        return
    loads = orjson.loads
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                yield number, loads(line), None, len(line)
            except orjson.JSONDecodeError:
                # Parsed again without its line break, so that the column is the line's own.
                try:
                    loads(line.rstrip(b"\r\n"))
                except orjson.JSONDecodeError as exc:
                    yield number, None, RowProblem(number, f"not JSON: {exc.msg}", exc.colno), len(line)
