"""The parser's shared lexing: quotes, flags, `key=value` pairs and how values are typed or refused."""

from __future__ import annotations

import pytest

from bot.grammar import CommandError, RunCommand, parse_command

VALID = [
    ("run recipe=sft-tiny use_peft=true", RunCommand(recipe="sft-tiny", overrides={"use_peft": True})),
    ("run recipe=sft-tiny use_peft=False", RunCommand(recipe="sft-tiny", overrides={"use_peft": False})),
    (
        "run recipe=sft-tiny warmup_ratio=.05",
        RunCommand(recipe="sft-tiny", overrides={"warmup_ratio": 0.05}, written={"warmup_ratio": ".05"}),
    ),
    ("run recipe=sft-tiny lr=1E-3", RunCommand(recipe="sft-tiny", overrides={"lr": 1e-3}, written={"lr": "1E-3"})),
    ("run recipe=sft-tiny scheduler=cosine", RunCommand(recipe="sft-tiny", overrides={"scheduler": "cosine"})),
    (
        'run recipe=sft-tiny lora_target_modules="q_proj v_proj"',
        RunCommand(recipe="sft-tiny", overrides={"lora_target_modules": "q_proj v_proj"}),
    ),
    (
        "run recipe=sft-tiny lora_target_modules=\u201cq_proj v_proj\u201d",
        RunCommand(recipe="sft-tiny", overrides={"lora_target_modules": "q_proj v_proj"}),
    ),
    (
        "run recipe=sft-tiny dataset_text_field=\u2018text/body\u2019",
        RunCommand(recipe="sft-tiny", overrides={"dataset_text_field": "text/body"}),
    ),
    ("run recipe=sft-tiny \u2014dry-run", RunCommand(recipe="sft-tiny", dry_run=True)),
]

VALID_IDS = [
    "run-bool-true",
    "run-bool-false-case",
    "run-float-leading-dot",
    "run-float-exponent-upper",
    "run-string",
    "run-quoted-space",
    "run-smart-double-quotes",
    "run-smart-single-quotes",
    "run-em-dash-flag",
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=VALID_IDS)
def test_valid_commands(text: str, expected: object) -> None:
    assert parse_command(text) == expected


INVALID = [
    ("run recipe=sft-tiny lr=1 lr=2", "lr is given twice", []),
    ("run recipe=a recipe=b", "recipe is given twice", []),
    ("run recipe=sft-tiny --dryrun", "did you mean --dry-run?", ["--dry-run"]),
    ("run recipe=sft-tiny --dry-run --dry-run", "given twice", []),
    ("run recipe=sft-tiny =3", "a value without a key", []),
    ('run recipe=sft-tiny name="unclosed', "check your quotes", []),
    ("run recipe=sft-tiny x={{globals.run_outputs_path}}", "not a plain value", []),
    ("run recipe=sft-tiny x={%raw%}", "not a plain value", []),
    ("run recipe=sft-tiny 'x=a: b'", "not a plain value", []),
    ("run recipe=sft-tiny 'x=a #c'", "not a plain value", []),
    ("run recipe=sft-tiny x=[1,2]", "not a plain value", []),
    ("run recipe=sft-tiny 'x={a: 1}'", "not a plain value", []),
    ("run recipe=sft-tiny x=--max_steps=9", "not a plain value", []),
    ("run recipe=sft-tiny 'x=a;rm -rf /'", "shell syntax is not accepted", []),
    ("run recipe=sft-tiny x=$(id)", "shell syntax is not accepted", []),
    ("run recipe=sft-tiny x=`id`", "shell syntax is not accepted", []),
    ("run recipe=sft-tiny x=&anchor", "shell syntax is not accepted", []),
    ("run recipe=sft-tiny x=*alias", "not a plain value", []),
    ("run recipe=sft-tiny x=!!python/object", "not a plain value", []),
    ("run recipe=sft-tiny 'x=a\nb: c'", "not a plain value", []),
    ("run recipe=sft-tiny x=a\x00b", "control characters", []),
    ("run recipe=sft-tiny x=" + "a" * 201, "too long", []),
]


def _invalid_id(case: tuple[str, str, list[str]]) -> str:
    return case[1][:40].replace(" ", "-")


@pytest.mark.parametrize(("text", "message", "suggestions"), INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_commands(text: str, message: str, suggestions: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
    assert info.value.suggestions[: len(suggestions)] == suggestions


def test_error_str_is_the_message() -> None:
    with pytest.raises(CommandError) as info:
        parse_command("stauts")
    assert str(info.value) == info.value.message
