"""`run`: recipe, presets and training overrides."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, RunCommand, parse_command

VALID = [
    (
        "run recipe=sft-tiny lr=3e-4 preset=cpu-small",
        RunCommand(recipe="sft-tiny", presets=["cpu-small"], overrides={"lr": 3e-4}, written={"lr": "3e-4"}),
    ),
    (
        "run recipe=sft-tiny preset=gpu-1x,spot epochs=3 --dry-run",
        RunCommand(recipe="sft-tiny", presets=["gpu-1x", "spot"], overrides={"epochs": 3}, dry_run=True),
    ),
    ("run recipe=sft-tiny --force", RunCommand(recipe="sft-tiny", force=True)),
    ("run recipe=sft-tiny --dry-run --force", RunCommand(recipe="sft-tiny", dry_run=True, force=True)),
    (
        "run recipe=SFT-TINY preset=GPU-1X",
        RunCommand(
            recipe="sft-tiny",
            presets=["gpu-1x"],
            notes=["recipe SFT-TINY read as sft-tiny, preset GPU-1X read as gpu-1x: names are lower-case"],
        ),
    ),
    (
        "run recipe=Sft-Tiny preset=cpu-small,Spot",
        RunCommand(
            recipe="sft-tiny",
            presets=["cpu-small", "spot"],
            notes=["recipe Sft-Tiny read as sft-tiny, preset Spot read as spot: names are lower-case"],
        ),
    ),
    (
        "run recipe=sft-tiny seed=1e3 max_steps=100.0 lr=1",
        RunCommand(
            recipe="sft-tiny",
            overrides={"seed": 1000.0, "max_steps": 100.0, "lr": 1},
            written={"seed": "1e3", "max_steps": "100.0"},
        ),
    ),
    ("run recipe=sft-tiny notify=dm", RunCommand(recipe="sft-tiny", notify="dm")),
    (
        "run recipe=sft-tiny notify=Both max_steps=4",
        RunCommand(recipe="sft-tiny", notify="both", overrides={"max_steps": 4}),
    ),
    ("run recipe=sft-tiny notify=thread", RunCommand(recipe="sft-tiny", notify="thread")),
]

VALID_IDS = [
    "run-basic",
    "run-presets-stacked-dry-run",
    "run-force",
    "run-dry-run-force",
    "run-upper-case-names-noted-once",
    "run-mixed-case-preset-noted",
    "run-floats-keep-their-text",
    "run-notify-dm-not-an-override",
    "run-notify-any-case",
    "run-notify-thread",
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
    ("run recipe=sft-tiny preset=GPU-1X,gpu-1x", "preset gpu-1x is listed twice", []),
    ("run recipe=SFT_TINY", "recipe 'SFT_TINY' is not a name", []),
    ("run recipe=sft-tiny --forse", "did you mean --force?", ["--force"]),
    ("run recipe=sft-tiny resume_from=runs/a/outputs", "resume_from is set only by `/finetune resume", []),
    ("run recipe=sft-tiny resume-from=x", "set only by `/finetune resume", []),
    ("run recipe=sft-tiny notify=dms", "notify=dms is not a way to tell you: notify=thread", ["notify=dm"]),
    ("run recipe=sft-tiny notify=thraed", "did you mean notify=thread?", ["notify=thread"]),
    ("run recipe=sft-tiny notify=email", "notify=dm (a direct message) or notify=both", []),
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


def test_names_already_lower_case_leave_no_note() -> None:
    command = parse_command("run recipe=sft-tiny preset=gpu-1x,spot")
    assert isinstance(command, RunCommand)
    assert command.notes == [] and command.written == {} and command.force is False


def test_a_float_keeps_the_text_it_was_written_as_and_round_trips() -> None:
    command = parse_command("run recipe=sft-tiny seed=1e3 lr=3e-4 epochs=2")
    assert isinstance(command, RunCommand)
    assert type(command.overrides["seed"]) is float and type(command.overrides["epochs"]) is int
    assert command.written == {"seed": "1e3", "lr": "3e-4"}
    assert RunCommand.model_validate_json(command.model_dump_json()) == command
