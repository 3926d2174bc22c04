"""`status`, `logs`, `compare`, `stop` and `resume`."""

from __future__ import annotations

import pytest

from bot.grammar import (
    CommandError,
    CompareCommand,
    LogsCommand,
    ResumeCommand,
    StatusCommand,
    StopCommand,
    parse_command,
)

VALID = [
    ("status", StatusCommand()),
    ("status 1a2b3c4d", StatusCommand(run="1a2b3c4d")),
    ("logs sft-tiny-42 lines=200", LogsCommand(run="sft-tiny-42", lines=200)),
    ("logs 1a2b3c4d", LogsCommand(run="1a2b3c4d", lines=50)),
    ("logs sft-tiny-42 follow", LogsCommand(run="sft-tiny-42", follow=True)),
    ("logs sft-tiny-42 Follow", LogsCommand(run="sft-tiny-42", follow=True)),
    ("logs 1a2b3c4d --follow", LogsCommand(run="1a2b3c4d", follow=True)),
    ("compare a1b2c3d4 e5f6a7b8", CompareCommand(runs=["a1b2c3d4", "e5f6a7b8"])),
    ("compare a1b2c3d4", CompareCommand(runs=["a1b2c3d4"])),
    (
        "compare a1 b2 c3 metric=eval_loss --exploratory",
        CompareCommand(runs=["a1", "b2", "c3"], metric="eval_loss", exploratory=True),
    ),
    ("stop 1a2b3c4d", StopCommand(run="1a2b3c4d")),
    ("resume 1a2b3c4d", ResumeCommand(run="1a2b3c4d", checkpoint="latest")),
    ("resume 1a2b3c4d checkpoint=step-500", ResumeCommand(run="1a2b3c4d", checkpoint="step-500")),
    ("resume 1a2b3c4d max_steps=800", ResumeCommand(run="1a2b3c4d", max_steps=800)),
    (
        "resume 1a2b3c4d checkpoint=step-40 max_steps=80",
        ResumeCommand(run="1a2b3c4d", checkpoint="step-40", max_steps=80),
    ),
]

VALID_IDS = [
    "status-all",
    "status-run",
    "logs-lines",
    "logs-default",
    "logs-follow",
    "logs-follow-any-case",
    "logs-follow-flag",
    "compare-two",
    "compare-one",
    "compare-metric-exploratory",
    "stop",
    "resume-latest",
    "resume-step",
    "resume-extend-schedule",
    "resume-step-and-extend",
]


@pytest.mark.parametrize(("text", "expected"), VALID, ids=VALID_IDS)
def test_valid_commands(text: str, expected: object) -> None:
    assert parse_command(text) == expected


INVALID = [
    ("status a b", "unexpected 'b'", []),
    ("status bad/run", "is not a run", []),
    ("logs", "`logs` needs a RUN", []),
    ("logs abc lines=0", "out of bounds: 1..1000", []),
    ("logs abc lines=many", "expected a whole number", []),
    ("logs abc line=5", "unknown option 'line' for `logs`; did you mean lines?", ["lines"]),
    ("logs abc follow lines=5", "lines=N is for a one-off tail", []),
    ("logs abc folow", "unexpected 'folow' after `logs RUN`; did you mean follow?", []),
    ("logs abc follow --follow", "follow is given twice", []),
    ("logs abc follow now", "unexpected 'now' after `logs RUN follow`", []),
    ("logs abc --folow", "did you mean --follow?", ["--follow"]),
    ("compare", "needs a run", []),
    ("compare abc abc", "listed twice", []),
    ("compare " + " ".join(f"r{i}" for i in range(11)), "at most 10 runs", []),
    ("compare a b metric='eval loss'", "not a metric name", []),
    ("compare a b --exploratry", "did you mean --exploratory?", ["--exploratory"]),
    ("stop", "`stop` needs a RUN", []),
    ("resume abc checkpoint=step-x", "expected latest or step-N", []),
    ("resume abc checkpoint=earliest", "expected latest or step-N", []),
    ("resume abc max_steps=0", "max_steps=0: expected a whole number of steps, at least 1", []),
    ("resume abc max_steps=-5", "expected a whole number of steps, at least 1", []),
    ("resume abc max_steps=many", "max_steps='many': expected a whole number of steps", []),
    ("resume abc max_steps=1e3", "max_steps is an int: write 1000, not 1e3", []),
    ("resume abc max_steps=80.5", "max_steps is an int: write a whole number, not 80.5", []),
    ("resume abc max_step=80", "did you mean max_steps?", ["max_steps"]),
    ("resume abc --force", "unknown flag '--force' for `resume`", []),
]


def _invalid_id(case: tuple[str, str, list[str]]) -> str:
    return case[1][:40].replace(" ", "-")


@pytest.mark.parametrize(("text", "message", "suggestions"), INVALID, ids=[_invalid_id(c) for c in INVALID])
def test_invalid_commands(text: str, message: str, suggestions: list[str]) -> None:
    with pytest.raises(CommandError) as info:
        parse_command(text)
    assert message in info.value.message
    assert info.value.suggestions[: len(suggestions)] == suggestions


def test_resume_without_max_steps_keeps_the_schedule() -> None:
    command = parse_command("resume 1a2b3c4d")
    assert isinstance(command, ResumeCommand) and command.max_steps is None
