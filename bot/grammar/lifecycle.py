"""A run's lifecycle after submission: `status`, `logs`, `compare`, `stop`, `resume` and `outputs`."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from bot.grammar.lexing import (
    _FLOAT_RE,
    _INT_RE,
    CommandError,
    _Command,
    _flags,
    _key_values,
    _no_extra,
    _only_keys,
    _run_ref,
    closest,
    int_written_as_float,
)

MAX_LOG_LINES = 1000
MAX_COMPARE = 10

_METRIC_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_./-]{0,127}$")
_CHECKPOINT_RE = re.compile(r"^(latest|step-[0-9]{1,12})$")


class StatusCommand(_Command):
    """`status [RUN]`."""

    name: Literal["status"] = "status"
    run: str | None = None


class LogsCommand(_Command):
    """`logs RUN [lines=N]`, or `logs RUN follow`: the log streamed into the run's thread as it grows."""

    name: Literal["logs"] = "logs"
    run: str
    lines: int = 50
    follow: bool = False


class CompareCommand(_Command):
    """`compare RUN RUN… [metric=NAME] [--exploratory]`, or `compare SWEEP [top=N]`."""

    name: Literal["compare"] = "compare"
    runs: list[str]
    metric: str | None = None
    exploratory: bool = False
    # A sweep's best N trials by its eval metric (None: the sweep's default, 3).
    top: int | None = Field(default=None, ge=2, le=MAX_COMPARE)


class StopCommand(_Command):
    """`stop RUN`."""

    name: Literal["stop"] = "stop"
    run: str


class OutputsCommand(_Command):
    """`outputs RUN`: what the run wrote, read back from Polyaxon and checked."""

    name: Literal["outputs"] = "outputs"
    run: str


class ResumeCommand(_Command):
    """`resume RUN [checkpoint=latest|step-N] [max_steps=N]`."""

    name: Literal["resume"] = "resume"
    run: str
    checkpoint: str = "latest"
    # Extends the schedule of a succeeded run to N steps in all; None keeps the parent's schedule.
    max_steps: int | None = Field(default=None, ge=1)


def _parse_status(tokens: list[str]) -> StatusCommand:
    positional, pairs = _key_values(tokens, "status")
    _only_keys(pairs, (), "status")
    words, _ = _flags(positional, (), "status")
    if len(words) > 1:
        _no_extra(words[1:], "status RUN", "status [RUN]")
    return StatusCommand(run=_run_ref(words[0]) if words else None)


def _parse_logs(tokens: list[str]) -> LogsCommand:
    usage = "logs RUN [lines=N], or logs RUN follow"
    positional, pairs = _key_values(tokens, "logs")
    _only_keys(pairs, ("lines",), "logs")
    # `--follow` is how other tools spell it (tail -f, kubectl logs -f): accepted as the same word.
    words, flags = _flags(positional, ("--follow",), "logs")
    if not words:
        raise CommandError(f"`logs` needs a RUN; usage: {usage}")
    follow = "--follow" in flags
    rest = words[1:]
    if rest and rest[0].lower() == "follow":
        if follow:
            raise CommandError("follow is given twice")
        follow, rest = True, rest[1:]
    if rest and not follow and closest(rest[0].lower(), ["follow"]):
        raise CommandError(f"unexpected {rest[0]!r} after `logs RUN`; did you mean follow? usage: {usage}")
    _no_extra(rest, "logs RUN follow" if follow else "logs RUN", usage)
    if follow and "lines" in pairs:
        raise CommandError(
            "lines=N is for a one-off tail; `logs RUN follow` starts with the log's last lines and streams each new "
            "one as it comes, so it takes no lines="
        )
    lines = 50
    if "lines" in pairs:
        raw = pairs["lines"]
        if not _INT_RE.match(raw):
            raise CommandError(f"lines={raw!r}: expected a whole number 1..{MAX_LOG_LINES}")
        lines = int(raw)
        if not 1 <= lines <= MAX_LOG_LINES:
            raise CommandError(f"lines={lines} is out of bounds: 1..{MAX_LOG_LINES}")
    return LogsCommand(run=_run_ref(words[0]), lines=lines, follow=follow)


def _parse_compare(tokens: list[str]) -> CompareCommand:
    usage = "compare RUN [RUN…] [metric=NAME] [--exploratory], or compare SWEEP [top=N]"
    positional, pairs = _key_values(tokens, "compare")
    _only_keys(pairs, ("metric", "top"), "compare")
    words, flags = _flags(positional, ("--exploratory",), "compare")
    runs = [_run_ref(word) for word in words]
    if not runs:
        # One run alone is compared with its recipe's recent runs on the same eval contract (the card's button).
        raise CommandError(f"`compare` needs a run (or several); usage: {usage}")
    if len(runs) > MAX_COMPARE:
        raise CommandError(f"`compare` takes at most {MAX_COMPARE} runs")
    duplicates = sorted({run for run in runs if runs.count(run) > 1})
    if duplicates:
        raise CommandError(f"run {duplicates[0]} is listed twice")
    metric = pairs.get("metric")
    if metric is not None and not _METRIC_RE.match(metric):
        raise CommandError(f"metric={metric!r} is not a metric name")
    top = None
    if "top" in pairs:
        raw = pairs["top"]
        if not _INT_RE.match(raw) or not 2 <= int(raw) <= MAX_COMPARE:
            raise CommandError(f"top={raw!r}: expected a whole number 2..{MAX_COMPARE} (the best N trials of a sweep)")
        if len(runs) > 1:
            raise CommandError("top=N picks the best trials of one sweep: give one SWEEP, or list the runs")
        top = int(raw)
    return CompareCommand(runs=runs, metric=metric, exploratory="--exploratory" in flags, top=top)


def _parse_stop(tokens: list[str]) -> StopCommand:
    positional, pairs = _key_values(tokens, "stop")
    _only_keys(pairs, (), "stop")
    words, _ = _flags(positional, (), "stop")
    if not words:
        raise CommandError("`stop` needs a RUN; usage: stop RUN")
    _no_extra(words[1:], "stop RUN", "stop RUN")
    return StopCommand(run=_run_ref(words[0]))


def _parse_outputs(tokens: list[str]) -> OutputsCommand:
    positional, pairs = _key_values(tokens, "outputs")
    _only_keys(pairs, (), "outputs")
    words, _ = _flags(positional, (), "outputs")
    if not words:
        raise CommandError("`outputs` needs a RUN; usage: outputs RUN")
    _no_extra(words[1:], "outputs RUN", "outputs RUN")
    return OutputsCommand(run=_run_ref(words[0]))


def _positive_int(key: str, raw: str) -> int:
    if _INT_RE.match(raw):
        if int(raw) < 1:
            raise CommandError(f"{key}={int(raw)}: expected a whole number of steps, at least 1")
        return int(raw)
    if _FLOAT_RE.match(raw):
        raise CommandError(int_written_as_float(key, raw, float(raw)))
    raise CommandError(f"{key}={raw!r}: expected a whole number of steps, at least 1")


def _parse_resume(tokens: list[str]) -> ResumeCommand:
    usage = "resume RUN [checkpoint=latest|step-N] [max_steps=N]"
    positional, pairs = _key_values(tokens, "resume")
    _only_keys(pairs, ("checkpoint", "max_steps"), "resume")
    words, _ = _flags(positional, (), "resume")
    if not words:
        raise CommandError(f"`resume` needs a RUN; usage: {usage}")
    _no_extra(words[1:], "resume RUN", usage)
    checkpoint = pairs.get("checkpoint", "latest")
    if not _CHECKPOINT_RE.match(checkpoint):
        raise CommandError(f"checkpoint={checkpoint!r}: expected latest or step-N (e.g. step-500)")
    max_steps = _positive_int("max_steps", pairs["max_steps"]) if "max_steps" in pairs else None
    return ResumeCommand(run=_run_ref(words[0]), checkpoint=checkpoint, max_steps=max_steps)
