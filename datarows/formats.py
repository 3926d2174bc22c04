"""TRL's dataset formats, and telling a dataset's format from its columns. Pure, stdlib only.

The formats are TRL's (https://huggingface.co/docs/trl/dataset_formats), each standard (strings) or
conversational (lists of `{"role", "content"}` messages):

    language_modeling      text                      (conversational: messages)
    prompt_only            prompt
    prompt_completion      prompt, completion
    preference             prompt, chosen, rejected  (an explicit prompt)
    implicit_preference    chosen, rejected          (the prompt inside each)
    unpaired_preference    prompt, completion, label (label: a bool, desirable or not)

Other columns may ride along (a reward function's reference `answer`, say); they never decide the format.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# The columns that make each format, in the order the checks below try them (most specific first).
FORMAT_COLUMNS: dict[str, tuple[str, ...]] = {
    "unpaired_preference": ("prompt", "completion", "label"),
    "preference": ("prompt", "chosen", "rejected"),
    "implicit_preference": ("chosen", "rejected"),
    "prompt_completion": ("prompt", "completion"),
    "language_modeling": ("text",),
    "prompt_only": ("prompt",),
}
CONVERSATIONAL_TEXT = "messages"  # a conversational language-modeling dataset's column, instead of `text`


@dataclass(frozen=True)
class DataFormat:
    """A dataset's format: one of `FORMAT_COLUMNS` and whether its messages are conversational."""

    name: str
    conversational: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        """The columns this format needs."""
        if self.name == "language_modeling" and self.conversational:
            return (CONVERSATIONAL_TEXT,)
        return FORMAT_COLUMNS[self.name]

    def describe(self) -> str:
        """`preference (prompt, chosen, rejected)`, `conversational language_modeling (messages)`."""
        kind = "conversational " if self.conversational else ""
        return f"{kind}{self.name} ({', '.join(self.columns)})"


def detect_format(columns: Iterable[str], row: Mapping[str, Any] | None = None) -> DataFormat | None:
    """The format `columns` make (None when they make none); `row`, a first row, tells conversational data apart."""
    present = set(columns)
    if CONVERSATIONAL_TEXT in present and "text" not in present and not {"prompt", "chosen"} & present:
        return DataFormat("language_modeling", conversational=True)
    for name, needed in FORMAT_COLUMNS.items():
        if present.issuperset(needed):
            key = needed[0] if name != "unpaired_preference" else "prompt"
            return DataFormat(name, conversational=row is not None and is_messages(row.get(key)))
    return None


def is_messages(value: Any) -> bool:
    """A conversational value: a non-empty list of `{"role": str, "content": ...}` messages."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(m, dict) and isinstance(m.get("role"), str) and "content" in m for m in value)
    )
