"""The model registry: `register` a run's model and `trace` a model version back to its run."""

from __future__ import annotations

import re
from typing import Literal

from bot.grammar.lexing import CommandError, _Command, _flags, _key_values, _no_extra, _only_keys, _run_ref

MODEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
VERSION_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class RegisterCommand(_Command):
    """`register RUN model=NAME [version=V]`."""

    name: Literal["register"] = "register"
    run: str
    model: str
    version: str | None = None


class TraceCommand(_Command):
    """`trace MODEL[:VERSION]`."""

    name: Literal["trace"] = "trace"
    model: str
    version: str | None = None


def _parse_register(tokens: list[str]) -> RegisterCommand:
    usage = "register RUN model=NAME [version=V]"
    positional, pairs = _key_values(tokens, "register")
    _only_keys(pairs, ("model", "version"), "register")
    words, _ = _flags(positional, (), "register")
    if not words:
        raise CommandError(f"`register` needs a RUN; usage: {usage}")
    _no_extra(words[1:], "register RUN", usage)
    model = pairs.get("model")
    if model is None:
        raise CommandError(f"`register` needs model=NAME; usage: {usage}")
    if not MODEL_RE.match(model):
        raise CommandError(f"model={model!r} is not a model name (letters, digits, . _ -)")
    version = pairs.get("version")
    if version is not None and not VERSION_RE.match(version):
        raise CommandError(f"version={version!r} is not a version (letters, digits, . _ -)")
    return RegisterCommand(run=_run_ref(words[0]), model=model, version=version)


def _parse_trace(tokens: list[str]) -> TraceCommand:
    usage = "trace MODEL[:VERSION]"
    words, _ = _flags(tokens, (), "trace")
    if not words:
        raise CommandError(f"`trace` needs a MODEL; usage: {usage}")
    _no_extra(words[1:], "trace MODEL", usage)
    model, sep, version = words[0].partition(":")
    if not MODEL_RE.match(model):
        raise CommandError(f"{model!r} is not a model name (letters, digits, . _ -)")
    if sep and not VERSION_RE.match(version):
        raise CommandError(f"{version!r} is not a version (letters, digits, . _ -)")
    return TraceCommand(model=model, version=version if sep else None)
