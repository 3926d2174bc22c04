"""Cluster settings and pinned keys are refused on the command line, with the preset to try instead."""

from __future__ import annotations

import pytest

from bot.grammar import PINNED_KEYS, CommandError, normalize_key, parse_command

INVALID = [
    ("run recipe=sft-tiny nodeSelector=gpu", "cluster settings come from presets", []),
    ("run recipe=sft-tiny gpus=8", "cluster settings come from presets: try preset=gpu-8x", ["gpu-8x"]),
    ("run recipe=sft-tiny gpus=1", "try preset=gpu-1x", ["gpu-1x"]),
    ("run recipe=sft-tiny node_selector=a", "cluster setting", []),
    ("run recipe=sft-tiny resources.limits.cpu=4", "cluster setting", []),
    ("run recipe=sft-tiny tolerations=spot", "try preset=spot", ["spot"]),
    ("run recipe=sft-tiny queue=gpu", "cluster setting", []),
    ("run recipe=sft-tiny memory=16Gi", "try preset=cpu-small", ["cpu-small"]),
    ("run recipe=sft-tiny image=evil:latest", "pinned by the recipe", []),
    ("run recipe=sft-tiny model_revision=main", "pinned by the recipe", []),
    (
        "run recipe=sft-tiny resume_from=latest",
        "resume_from is set only by `/finetune resume RUN [checkpoint=latest|step-N]`",
        [],
    ),
    ("run recipe=sft-tiny resumeFrom=latest", "set only by `/finetune resume", []),
]


def _invalid_id(case: tuple[str, str, list[str]]) -> str:
    return case[1][:40].replace(" ", "-")


@pytest.mark.parametrize(("text", "message", "suggestions"), INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_commands(text: str, message: str, suggestions: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
    assert info.value.suggestions[: len(suggestions)] == suggestions


def test_resume_from_is_a_pinned_key() -> None:
    assert "resumefrom" in PINNED_KEYS and normalize_key("resume_from") in PINNED_KEYS
