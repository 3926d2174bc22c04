"""A random sweep over a range between whole numbers (`epochs=uniform(1,5)`) without trials=N: what the range
samples (real numbers, which a key of whole numbers refuses) is said first, then that trials=N is missing."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, parse_command


def refusal(text: str) -> str:
    with pytest.raises(CommandError) as refused:
        parse_command(text)
    return refused.value.message


def test_a_range_of_whole_numbers_is_told_before_the_missing_trials() -> None:
    told = refusal("sweep recipe=quickstart epochs=uniform(1,5)")
    assert told == (
        "epochs=uniform(1,5) samples real numbers, not whole ones: if epochs takes whole numbers, list them, as "
        "epochs=1,2,3,4,5 (a grid: every value, no trials=N needed) or epochs=choice(1,2,3,4,5) mode=random "
        "trials=N; a random sweep needs trials=N (how many points to sample), e.g. trials=8"
    )


def test_a_wide_range_of_whole_numbers_suggests_a_few_of_them() -> None:
    told = refusal("sweep recipe=sft-tiny max_steps=loguniform(10,1000) lr=0.1,0.2")
    assert told.startswith("max_steps=loguniform(10,1000) samples real numbers, not whole ones: ")
    assert "max_steps=10,505,1000 (a grid" in told and told.endswith(
        "a random sweep needs trials=N (how many points to sample), e.g. trials=8"
    )


def test_a_range_of_real_numbers_is_only_asked_its_trials() -> None:
    assert refusal("sweep recipe=quickstart lr=uniform(0.01,0.5)") == (
        "a random sweep needs trials=N (how many points to sample), e.g. trials=8"
    )


def test_listed_whole_numbers_sweep_as_a_grid_with_no_trials() -> None:
    command = parse_command("sweep recipe=quickstart epochs=1,2,3,4,5")
    assert command.name == "sweep" and command.mode == "grid" and command.trials == 5
