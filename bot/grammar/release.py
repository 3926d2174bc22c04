"""The release path: `promote MODEL:VERSION stage=staging|production` and `rollback MODEL stage=STAGE`."""

from __future__ import annotations

from typing import Literal

from bot.grammar.lexing import CommandError, _Command, _flags, _key_values, _no_extra, _only_keys, closest, did_you_mean
from bot.grammar.registration import MODEL_RE, VERSION_RE

Stage = Literal["staging", "production"]
STAGES: tuple[Stage, ...] = ("staging", "production")


class PromoteCommand(_Command):
    """`promote MODEL:VERSION stage=staging|production`."""

    name: Literal["promote"] = "promote"
    model: str
    version: str
    stage: Stage


class RollbackCommand(_Command):
    """`rollback MODEL stage=staging|production`."""

    name: Literal["rollback"] = "rollback"
    model: str
    stage: Stage


def _stage(value: str | None, usage: str, subcommand: str) -> Stage:
    if value is None:
        raise CommandError(f"`{subcommand}` needs stage={'|'.join(STAGES)}; usage: {usage}")
    stage = value.lower()
    for known in STAGES:
        if stage == known:
            return known
    # `prod` and `stag` are what people type: a prefix is the closest name before any spelling distance.
    suggestions: list[str] = [str(known) for known in STAGES if stage and known.startswith(stage)]
    suggestions = suggestions or closest(stage, STAGES)
    raise CommandError(
        f"stage={value!r} is not a release stage{did_you_mean(suggestions)} (stages: {', '.join(STAGES)}; "
        "`testing` is where registration puts a version, `disabled` where a rollback or a newer version moves it)",
        suggestions=suggestions,
    )


def _model(word: str, usage: str) -> str:
    if not MODEL_RE.match(word):
        raise CommandError(f"{word!r} is not a model name (letters, digits, . _ -); usage: {usage}")
    return word


def _parse_promote(tokens: list[str]) -> PromoteCommand:
    usage = "promote MODEL:VERSION stage=staging|production"
    positional, pairs = _key_values(tokens, "promote")
    _only_keys(pairs, ("stage",), "promote")
    words, _ = _flags(positional, (), "promote")
    if not words:
        raise CommandError(f"`promote` needs MODEL:VERSION; usage: {usage}")
    _no_extra(words[1:], "promote MODEL:VERSION", usage)
    model, sep, version = words[0].partition(":")
    if not sep or not version:
        raise CommandError(
            f"`promote` needs the version too: `{words[0]}:v1`, say (`/finetune trace {words[0]}` lists it); "
            f"usage: {usage}"
        )
    if not VERSION_RE.match(version):
        raise CommandError(f"{version!r} is not a version (letters, digits, . _ -)")
    stage = _stage(pairs.get("stage"), usage, "promote")
    return PromoteCommand(model=_model(model, usage), version=version, stage=stage)


def _parse_rollback(tokens: list[str]) -> RollbackCommand:
    usage = "rollback MODEL stage=staging|production"
    positional, pairs = _key_values(tokens, "rollback")
    _only_keys(pairs, ("stage",), "rollback")
    words, _ = _flags(positional, (), "rollback")
    if not words:
        raise CommandError(f"`rollback` needs a MODEL; usage: {usage}")
    _no_extra(words[1:], "rollback MODEL", usage)
    if ":" in words[0]:
        raise CommandError(
            f"`rollback` takes the model, not a version (`{words[0].partition(':')[0]}`): it moves the stage back "
            f"to the version that held it before; usage: {usage}"
        )
    stage = _stage(pairs.get("stage"), usage, "rollback")
    return RollbackCommand(model=_model(words[0], usage), stage=stage)
