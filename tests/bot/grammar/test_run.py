"""`run`: recipe, presets and training overrides."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, RunCommand, parse_command

VALID = [
    (
        "run recipe=sft-tiny lr=3e-4 preset=cpu-small",
        RunCommand(recipe="sft-tiny", presets=["cpu-small"], overrides={"lr": 3e-4}),
    ),
    (
        "run recipe=sft-tiny preset=gpu-1x,spot epochs=3 --dry-run",
        RunCommand(recipe="sft-tiny", presets=["gpu-1x", "spot"], overrides={"epochs": 3}, dry_run=True),
    ),
]

VALID_IDS = [
    "run-basic",
    "run-presets-stacked-dry-run",
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=VALID_IDS)
def test_valid_commands(text: str, expected: object) -> None:
    assert parse_command(text) == expected


INVALID = [
    ("run", "`run` needs recipe=NAME", []),
    ("run recipe=sft-tiny preset=a,a", "preset a is listed twice", []),
    ("run recipe=sft-tiny preset=a, ", "empty preset name", []),
    ("run recipe=sft-tiny preset=a presets=b", "give presets once", []),
    ("run recipe=sft-tiny stray", "'stray' is not KEY=VALUE", []),
    ("run recipe=Sft_Tiny", "is not a name", []),
    ("run recipe=sft-tiny LR=1", "not a training key", []),
]


def _invalid_id(case: tuple[str, str, list[str]]) -> str:
    return case[1][:40].replace(" ", "-")


@pytest.mark.parametrize(("text", "message", "suggestions"), INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_commands(text: str, message: str, suggestions: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
    assert info.value.suggestions[: len(suggestions)] == suggestions


def test_commands_are_typed_and_json_able() -> None:
    command = parse_command("run recipe=sft-tiny lr=3e-4 epochs=2 use_peft=true scheduler=cosine")
    assert isinstance(command, RunCommand)
    assert command.overrides == {"lr": 3e-4, "epochs": 2, "use_peft": True, "scheduler": "cosine"}
    assert type(command.overrides["epochs"]) is int
    assert RunCommand.model_validate_json(command.model_dump_json()) == command
