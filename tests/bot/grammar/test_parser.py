"""The whole command line: subcommand names, the `/finetune` prefix, its length, and any text at all."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.grammar import CommandError, HelpCommand, RunCommand, parse_command

VALID = [
    ("/finetune run recipe=sft-tiny", RunCommand(recipe="sft-tiny")),
    ("  RUN   recipe=sft-tiny  ", RunCommand(recipe="sft-tiny")),
    ("", HelpCommand()),
]

VALID_IDS = [
    "run-with-slash-prefix",
    "run-case-and-spaces",
    "empty-is-help",
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=VALID_IDS)
def test_valid_commands(text: str, expected: object) -> None:
    assert parse_command(text) == expected


INVALID = [
    ("stauts", "no subcommand 'stauts'; did you mean status?", ["status"]),
    ("rn recipe=x", "did you mean run?", ["run"]),
    ("x" * 2001, "too long", []),
]


def _invalid_id(case: tuple[str, str, list[str]]) -> str:
    return case[1][:40].replace(" ", "-")


@pytest.mark.parametrize(("text", "message", "suggestions"), INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_commands(text: str, message: str, suggestions: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
    assert info.value.suggestions[: len(suggestions)] == suggestions


SLACKISH = st.text(
    alphabet=st.sampled_from(
        [
            *"abcdefghijklmnopqrstuvwxyz0123456789=,.-_:/ '\"\\{}[]#&*!|<>$`;\n\t",
            *["\u201c", "\u201d", "\u2018", "\u2019", "\u2014", "\u00a0", "\x00", "\x7f", "é"],
        ]
    ),
    max_size=80,
)

PREFIXES = st.sampled_from(
    ["", "run ", "run recipe=sft-tiny ", "digest ", "compare a b ", "logs a ", "trace ", "help "]
)


@settings(max_examples=400, deadline=None)
@given(prefix=PREFIXES, rest=SLACKISH)
def test_any_text_gives_a_command_or_a_command_error(prefix: str, rest: str) -> None:
    try:
        command = parse_command(prefix + rest)
    except CommandError as exc:
        assert exc.message
        return
    assert command.name in {
        "run",
        "status",
        "logs",
        "compare",
        "stop",
        "resume",
        "register",
        "recipes",
        "presets",
        "digest",
        "trace",
        "help",
    }


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_unicode_never_raises_anything_else(text: str) -> None:
    with contextlib.suppress(CommandError):
        parse_command(text)
