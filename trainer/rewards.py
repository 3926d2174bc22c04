"""Named reward functions for GRPO and RLOO (`--reward_funcs format,length`), in TRL's reward-function signature.

Each function takes the batch's `completions` (and TRL's other keyword arguments: `prompts`, `completion_ids`,
every other dataset column as a list, `trainer_state`, ...) and returns one float per completion. A completion
is either standard text (`str`) or conversational (a list of messages, the generated one last:
`[{"role": "assistant", "content": "..."}]`); the functions score the text of its messages.

- `format`: 1.0 when the stripped completion is one line that ends with a full stop (`FORMAT_PATTERN`), else 0.0.
- `length`: closeness of the completion's word count to `LENGTH_TARGET_WORDS`: `max(0, 1 - |words - target| /
  target)`, 1.0 at the target, 0.0 at no words or at twice the target and beyond.
- `exact-match`: 1.0 when the stripped completion equals the stripped reference in the dataset column
  `answer` (`ANSWER_COLUMN`), else 0.0; a batch without that column, or a row whose value is missing, is an error.

Pure functions of their arguments: no model, no state. The evaluation procedure `gen-v1` reports each one used
as `eval_reward_<name>` (`metric_name`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

RewardFunction = Callable[..., list[float]]

FORMAT_PATTERN = re.compile(r"[^\n]*\S\.")
LENGTH_TARGET_WORDS = 6
ANSWER_COLUMN = "answer"


class RewardError(ValueError):
    """A reward function name is unknown, or a batch lacks what a reward function needs."""


def completion_text(completion: str | Sequence[Mapping[str, Any]]) -> str:
    """The text of a standard completion, or the joined contents of a conversational one's messages."""
    if isinstance(completion, str):
        return completion
    return "".join(_content_text(message.get("content", "")) for message in completion)


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    # Multimodal messages hold a list of typed parts; only the text parts count.
    return "".join(part.get("text", "") for part in content if isinstance(part, Mapping) and part.get("type") == "text")


def format_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 for a completion that is one line ending with a full stop, else 0.0."""
    return [1.0 if FORMAT_PATTERN.fullmatch(completion_text(c).strip()) else 0.0 for c in completions]


def length_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """Closeness of each completion's word count to LENGTH_TARGET_WORDS, in [0, 1]."""
    target = LENGTH_TARGET_WORDS
    return [max(0.0, 1.0 - abs(len(completion_text(c).split()) - target) / target) for c in completions]


def exact_match_reward(completions: Sequence[Any], **kwargs: Any) -> list[float]:
    """1.0 where the stripped completion equals the row's stripped `answer`, else 0.0."""
    if ANSWER_COLUMN not in kwargs:
        raise RewardError(f"reward exact-match needs the dataset column {ANSWER_COLUMN!r}, which the data lacks")
    answers = kwargs[ANSWER_COLUMN]
    if len(answers) != len(completions):
        raise RewardError(f"{len(completions)} completions but {len(answers)} values of column {ANSWER_COLUMN!r}")
    scores = []
    for index, (completion, answer) in enumerate(zip(completions, answers, strict=True)):
        if answer is None:
            raise RewardError(f"reward exact-match: row {index} of the batch has no value in column {ANSWER_COLUMN!r}")
        scores.append(1.0 if completion_text(completion).strip() == str(answer).strip() else 0.0)
    return scores


REGISTRY: dict[str, RewardFunction] = {
    "format": format_reward,
    "length": length_reward,
    "exact-match": exact_match_reward,
}
# The dataset columns each function reads (checked on the train and eval splits before a run trains).
COLUMNS: dict[str, tuple[str, ...]] = {"format": (), "length": (), "exact-match": (ANSWER_COLUMN,)}


def metric_name(name: str) -> str:
    """The eval metric that reports reward `name` (`exact-match` -> `eval_reward_exact_match`)."""
    return "eval_reward_" + name.replace("-", "_")


def parse_reward_names(text: str) -> tuple[str, ...]:
    """Split `--reward_funcs a,b` into registry names, refusing unknown or repeated ones and an empty list."""
    names = tuple(name.strip() for name in text.split(",") if name.strip())
    known = ", ".join(REGISTRY)
    unknown = [name for name in names if name not in REGISTRY]
    if unknown:
        raise RewardError(f"unknown reward functions {unknown}; known: {known}")
    if not names:
        raise RewardError(f"no reward functions given (--reward_funcs NAME[,NAME]; known: {known})")
    if len(set(names)) != len(names):
        raise RewardError(f"reward functions repeat in {text!r}")
    return names


def select(names: Sequence[str]) -> list[RewardFunction]:
    """The registry's functions for `names`, in order."""
    return [REGISTRY[name] for name in names]


def check_columns(names: Sequence[str], columns: Sequence[str], split: str) -> None:
    """Refuse a split that lacks a column one of the reward functions `names` reads."""
    for name in names:
        missing = [column for column in COLUMNS[name] if column not in columns]
        if missing:
            raise RewardError(f"reward {name} needs the column {missing[0]!r}, which the {split} split lacks")
