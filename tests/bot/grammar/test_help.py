"""`recipes`, `presets` and `help`."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, HelpCommand, PresetsCommand, RecipesCommand, parse_command

VALID = [
    ("recipes", RecipesCommand()),
    ("presets", PresetsCommand()),
    ("help", HelpCommand()),
    ("help run", HelpCommand(topic="run")),
]

VALID_IDS = [
    "recipes",
    "presets",
    "help",
    "help-topic",
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=VALID_IDS)
def test_valid_commands(text: str, expected: object) -> None:
    assert parse_command(text) == expected


INVALID = [
    ("recipes extra", "takes no arguments", []),
    ("presets extra", "takes no arguments", []),
    ("help stauts", "no help topic 'stauts'; did you mean status or outputs?", ["status", "outputs"]),
]


def _invalid_id(case: tuple[str, str, list[str]]) -> str:
    return case[1][:40].replace(" ", "-")


@pytest.mark.parametrize(("text", "message", "suggestions"), INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_commands(text: str, message: str, suggestions: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
    assert info.value.suggestions[: len(suggestions)] == suggestions
