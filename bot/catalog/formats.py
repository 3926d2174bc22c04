"""Which of TRL's dataset formats each trainer takes, and why a dataset does not fit a trainer. Pure.

The formats themselves (their columns, standard or conversational) are `datarows.formats`', which the trainer
checks every row with too.
"""

from __future__ import annotations

from collections.abc import Iterable

# The formats themselves are `datarows`' (the trainer checks every row with the same rules).
from datarows import CONVERSATIONAL_TEXT, FORMAT_COLUMNS, DataFormat, detect_format, is_messages

__all__ = [
    "CONVERSATIONAL_TEXT",
    "FORMAT_COLUMNS",
    "TRAINERS",
    "TRAINER_FORMATS",
    "TRAINER_TITLES",
    "DataFormat",
    "detect_format",
    "is_messages",
    "mismatch",
    "trainer_takes",
]

# What each trainer takes (TRL 1.x): SFT learns from text or prompt-completion pairs; DPO from pairs with their
# prompt; a reward model from pairs, with or without a separate prompt; KTO from single completions labelled
# desirable or not; GRPO and RLOO generate their own completions from prompts.
TRAINER_FORMATS: dict[str, tuple[str, ...]] = {
    "sft": ("language_modeling", "prompt_completion"),
    "dpo": ("preference",),
    "reward": ("preference", "implicit_preference"),
    "kto": ("unpaired_preference",),
    "grpo": ("prompt_only",),
    "rloo": ("prompt_only",),
}
TRAINERS = tuple(TRAINER_FORMATS)
TRAINER_TITLES = {"sft": "SFT", "dpo": "DPO", "reward": "A reward model", "kto": "KTO", "grpo": "GRPO", "rloo": "RLOO"}


def trainer_takes(trainer: str, data: DataFormat) -> bool:
    """Whether `trainer` trains on data of this format (standard or conversational alike)."""
    return data.name in TRAINER_FORMATS[trainer]


def mismatch(trainer: str, dataset: str, data: DataFormat, columns: Iterable[str]) -> str:
    """Why `trainer` cannot train on `dataset`: the columns it needs and those the dataset has."""
    wanted = " or ".join(f"{name} ({', '.join(FORMAT_COLUMNS[name])})" for name in TRAINER_FORMATS[trainer])
    return (
        f"{TRAINER_TITLES[trainer]} needs {wanted}; dataset {dataset} is {data.describe()} "
        f"with columns {', '.join(sorted(columns))}"
    )
