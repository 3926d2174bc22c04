"""`outputs RUN`, `preflight recipe=…` and `run … --skip-preflight`."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, OutputsCommand, PreflightCommand, RunCommand, parse_command


def test_outputs_takes_one_run() -> None:
    assert parse_command("outputs 1a2b3c4d") == OutputsCommand(run="1a2b3c4d")
    assert parse_command("/finetune outputs sft-tiny-42") == OutputsCommand(run="sft-tiny-42")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("outputs", "needs a RUN"),
        ("outputs a1b2c3d4 e5f6a7b8", "outputs RUN"),
        ("outputs a1b2c3d4 path=x", "path"),
        ("outputs ../etc", "is not a run"),
    ],
)
def test_outputs_refuses(text: str, needle: str) -> None:
    with pytest.raises(CommandError) as err:
        parse_command(text)
    assert needle in err.value.message


def test_preflight_reads_recipe_presets_and_overrides_like_run() -> None:
    cmd = parse_command("preflight recipe=SFT-Tiny-DDP preset=ddp-cpu-2 lr=1e-3 max_steps=10")
    assert cmd == PreflightCommand(
        recipe="sft-tiny-ddp",
        presets=["ddp-cpu-2"],
        overrides={"lr": 1e-3, "max_steps": 10},
        written={"lr": "1e-3"},
        notes=["recipe SFT-Tiny-DDP read as sft-tiny-ddp: names are lower-case"],
    )


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        ("preflight", "needs recipe=NAME"),
        ("preflight recipe=sft-tiny-ddp --dry-run", "--dry-run"),
        ("preflight recipe=sft-tiny-ddp gpus=8", "cluster setting"),
        ("preflight recipe=sft-tiny-ddp image=x", "pinned"),
        ("preflight recipe=sft-tiny-ddp extra", "not KEY=VALUE"),
    ],
)
def test_preflight_refuses_what_run_refuses(text: str, needle: str) -> None:
    with pytest.raises(CommandError) as err:
        parse_command(text)
    assert needle in err.value.message


def test_skip_preflight_is_a_run_flag() -> None:
    cmd = parse_command("run recipe=sft-tiny-ddp --skip-preflight")
    assert isinstance(cmd, RunCommand) and cmd.skip_preflight and not cmd.force
    assert not parse_command("run recipe=sft-tiny-ddp").skip_preflight  # type: ignore[union-attr]
