"""`register` and `trace`."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, RegisterCommand, TraceCommand, parse_command

VALID = [
    ("register 1a2b3c4d model=tiny-chat", RegisterCommand(run="1a2b3c4d", model="tiny-chat")),
    ("register 1a2b3c4d model=tiny-chat version=v2", RegisterCommand(run="1a2b3c4d", model="tiny-chat", version="v2")),
    ("trace tiny-chat", TraceCommand(model="tiny-chat")),
    ("trace tiny-chat:v3", TraceCommand(model="tiny-chat", version="v3")),
]

VALID_IDS = [
    "register",
    "register-version",
    "trace",
    "trace-version",
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=VALID_IDS)
def test_valid_commands(text: str, expected: object) -> None:
    assert parse_command(text) == expected


INVALID: list[tuple[str, str, list[str]]] = [
    ("register abc", "needs model=NAME", []),
    ("register abc model='my model'", "is not a model name", []),
    ("register abc model=m version=v/1", "is not a version", []),
    ("trace", "`trace` needs a MODEL", []),
    ("trace 'a b'", "is not a model name", []),
]


def _invalid_id(case: tuple[str, str, list[str]]) -> str:
    return case[1][:40].replace(" ", "-")


@pytest.mark.parametrize(("text", "message", "suggestions"), INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_commands(text: str, message: str, suggestions: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
    assert info.value.suggestions[: len(suggestions)] == suggestions
