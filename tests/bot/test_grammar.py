"""The `/finetune` parser: table-driven cases and a property test (text in, command or CommandError out)."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.grammar import (
    CommandError,
    CompareCommand,
    DigestCommand,
    HelpCommand,
    LogsCommand,
    PresetsCommand,
    RecipesCommand,
    RegisterCommand,
    ResumeCommand,
    RunCommand,
    StatusCommand,
    StopCommand,
    TraceCommand,
    parse_command,
)

VALID = [
    (
        "run recipe=sft-tiny lr=3e-4 preset=cpu-small",
        RunCommand(recipe="sft-tiny", presets=["cpu-small"], overrides={"lr": 3e-4}),
    ),
    (
        "run recipe=sft-tiny preset=gpu-1x,spot epochs=3 --dry-run",
        RunCommand(recipe="sft-tiny", presets=["gpu-1x", "spot"], overrides={"epochs": 3}, dry_run=True),
    ),
    ("run recipe=sft-tiny use_peft=true", RunCommand(recipe="sft-tiny", overrides={"use_peft": True})),
    ("run recipe=sft-tiny use_peft=False", RunCommand(recipe="sft-tiny", overrides={"use_peft": False})),
    ("run recipe=sft-tiny warmup_ratio=.05", RunCommand(recipe="sft-tiny", overrides={"warmup_ratio": 0.05})),
    ("run recipe=sft-tiny lr=1E-3", RunCommand(recipe="sft-tiny", overrides={"lr": 1e-3})),
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
        "run recipe=sft-tiny resume_from=\u2018runs/abc/outputs\u2019",
        RunCommand(recipe="sft-tiny", overrides={"resume_from": "runs/abc/outputs"}),
    ),
    ("run recipe=sft-tiny \u2014dry-run", RunCommand(recipe="sft-tiny", dry_run=True)),
    ("/finetune run recipe=sft-tiny", RunCommand(recipe="sft-tiny")),
    ("  RUN   recipe=sft-tiny  ", RunCommand(recipe="sft-tiny")),
    ("status", StatusCommand()),
    ("status 1a2b3c4d", StatusCommand(run="1a2b3c4d")),
    ("logs sft-tiny-42 lines=200", LogsCommand(run="sft-tiny-42", lines=200)),
    ("logs 1a2b3c4d", LogsCommand(run="1a2b3c4d", lines=50)),
    ("compare a1b2c3d4 e5f6a7b8", CompareCommand(runs=["a1b2c3d4", "e5f6a7b8"])),
    ("compare a1b2c3d4", CompareCommand(runs=["a1b2c3d4"])),
    (
        "compare a1 b2 c3 metric=eval_loss --exploratory",
        CompareCommand(runs=["a1", "b2", "c3"], metric="eval_loss", exploratory=True),
    ),
    ("stop 1a2b3c4d", StopCommand(run="1a2b3c4d")),
    ("resume 1a2b3c4d", ResumeCommand(run="1a2b3c4d", checkpoint="latest")),
    ("resume 1a2b3c4d checkpoint=step-500", ResumeCommand(run="1a2b3c4d", checkpoint="step-500")),
    ("register 1a2b3c4d model=tiny-chat", RegisterCommand(run="1a2b3c4d", model="tiny-chat")),
    ("register 1a2b3c4d model=tiny-chat version=v2", RegisterCommand(run="1a2b3c4d", model="tiny-chat", version="v2")),
    ("recipes", RecipesCommand()),
    ("presets", PresetsCommand()),
    ("digest daily 09:00", DigestCommand(mode="daily", time="09:00")),
    ("digest daily 9:05 Europe/Berlin", DigestCommand(mode="daily", time="09:05", tz="Europe/Berlin")),
    ("digest weekly Monday 17:30", DigestCommand(mode="weekly", day="mon", time="17:30")),
    ("digest weekly fri 08:00 tz=UTC", DigestCommand(mode="weekly", day="fri", time="08:00", tz="UTC")),
    ("digest off", DigestCommand(mode="off")),
    ("digest now", DigestCommand(mode="now")),
    ("trace tiny-chat", TraceCommand(model="tiny-chat")),
    ("trace tiny-chat:v3", TraceCommand(model="tiny-chat", version="v3")),
    ("help", HelpCommand()),
    ("help run", HelpCommand(topic="run")),
    ("", HelpCommand()),
]

VALID_IDS = [
    "run-basic",
    "run-presets-stacked-dry-run",
    "run-bool-true",
    "run-bool-false-case",
    "run-float-leading-dot",
    "run-float-exponent-upper",
    "run-string",
    "run-quoted-space",
    "run-smart-double-quotes",
    "run-smart-single-quotes",
    "run-em-dash-flag",
    "run-with-slash-prefix",
    "run-case-and-spaces",
    "status-all",
    "status-run",
    "logs-lines",
    "logs-default",
    "compare-two",
    "compare-one",
    "compare-metric-exploratory",
    "stop",
    "resume-latest",
    "resume-step",
    "register",
    "register-version",
    "recipes",
    "presets",
    "digest-daily",
    "digest-daily-tz",
    "digest-weekly-full-day",
    "digest-weekly-tz-key",
    "digest-off",
    "digest-now",
    "trace",
    "trace-version",
    "help",
    "help-topic",
    "empty-is-help",
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=VALID_IDS)
def test_valid_commands(text: str, expected: object) -> None:
    assert parse_command(text) == expected


INVALID = [
    ("stauts", "no subcommand 'stauts'; did you mean status?", ["status"]),
    ("rn recipe=x", "did you mean run?", ["run"]),
    ("run", "`run` needs recipe=NAME", []),
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
    ("run recipe=sft-tiny lr=1 lr=2", "lr is given twice", []),
    ("run recipe=a recipe=b", "recipe is given twice", []),
    ("run recipe=sft-tiny preset=a,a", "preset a is listed twice", []),
    ("run recipe=sft-tiny preset=a, ", "empty preset name", []),
    ("run recipe=sft-tiny preset=a presets=b", "give presets once", []),
    ("run recipe=sft-tiny --dryrun", "did you mean --dry-run?", ["--dry-run"]),
    ("run recipe=sft-tiny --dry-run --dry-run", "given twice", []),
    ("run recipe=sft-tiny stray", "'stray' is not KEY=VALUE", []),
    ("run recipe=Sft_Tiny", "is not a name", []),
    ("run recipe=sft-tiny LR=1", "not a training key", []),
    ("run recipe=sft-tiny =3", "a value without a key", []),
    ('run recipe=sft-tiny name="unclosed', "check your quotes", []),
    ("run recipe=sft-tiny x={{globals.run_outputs_path}}", "not a plain value", []),
    ("run recipe=sft-tiny x={%raw%}", "not a plain value", []),
    ("run recipe=sft-tiny 'x=a: b'", "not a plain value", []),
    ("run recipe=sft-tiny 'x=a #c'", "not a plain value", []),
    ("run recipe=sft-tiny x=[1,2]", "not a plain value", []),
    ("run recipe=sft-tiny 'x={a: 1}'", "not a plain value", []),
    ("run recipe=sft-tiny x=--max_steps=9", "not a plain value", []),
    ("run recipe=sft-tiny 'x=a;rm -rf /'", "not a plain value", []),
    ("run recipe=sft-tiny x=$(id)", "not a plain value", []),
    ("run recipe=sft-tiny x=`id`", "not a plain value", []),
    ("run recipe=sft-tiny x=&anchor", "not a plain value", []),
    ("run recipe=sft-tiny x=*alias", "not a plain value", []),
    ("run recipe=sft-tiny x=!!python/object", "not a plain value", []),
    ("run recipe=sft-tiny 'x=a\nb: c'", "not a plain value", []),
    ("run recipe=sft-tiny x=a\x00b", "control characters", []),
    ("run recipe=sft-tiny x=" + "a" * 201, "too long", []),
    ("status a b", "unexpected 'b'", []),
    ("status bad/run", "is not a run", []),
    ("logs", "`logs` needs a RUN", []),
    ("logs abc lines=0", "out of bounds: 1..1000", []),
    ("logs abc lines=many", "expected a whole number", []),
    ("logs abc line=5", "unknown option 'line' for `logs`; did you mean lines?", ["lines"]),
    ("compare", "needs a run", []),
    ("compare abc abc", "listed twice", []),
    ("compare " + " ".join(f"r{i}" for i in range(11)), "at most 10 runs", []),
    ("compare a b metric='eval loss'", "not a metric name", []),
    ("compare a b --exploratry", "did you mean --exploratory?", ["--exploratory"]),
    ("stop", "`stop` needs a RUN", []),
    ("resume abc checkpoint=step-x", "expected latest or step-N", []),
    ("resume abc checkpoint=earliest", "expected latest or step-N", []),
    ("register abc", "needs model=NAME", []),
    ("register abc model='my model'", "is not a model name", []),
    ("register abc model=m version=v/1", "is not a version", []),
    ("recipes extra", "takes no arguments", []),
    ("presets extra", "takes no arguments", []),
    ("digest", "needs a schedule", []),
    ("digest daily", "needs a time HH:MM", []),
    ("digest daily 25:00", "is not a time", []),
    ("digest daily 9am", "is not a time", []),
    ("digest weekly 09:00", "needs a day and a time", []),
    ("digest weekly mnday 09:00", "did you mean monday", ["monday"]),
    ("digest daily 09:00 Mars/Olympus", "unknown time zone", []),
    ("digest dialy 09:00", "did you mean daily?", ["daily"]),
    ("digest off now", "unexpected", []),
    ("trace", "`trace` needs a MODEL", []),
    ("trace 'a b'", "is not a model name", []),
    ("help stauts", "no help topic 'stauts'; did you mean status?", ["status"]),
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


def test_commands_are_typed_and_json_able() -> None:
    command = parse_command("run recipe=sft-tiny lr=3e-4 epochs=2 use_peft=true scheduler=cosine")
    assert isinstance(command, RunCommand)
    assert command.overrides == {"lr": 3e-4, "epochs": 2, "use_peft": True, "scheduler": "cosine"}
    assert type(command.overrides["epochs"]) is int
    assert RunCommand.model_validate_json(command.model_dump_json()) == command


def test_error_str_is_the_message() -> None:
    with pytest.raises(CommandError) as info:
        parse_command("stauts")
    assert str(info.value) == info.value.message


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
