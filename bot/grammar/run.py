"""`run`: a recipe, its presets and training overrides, checked against the cluster and pinned keys."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import Field

from bot.grammar.keys import PINNED_KEYS, cluster_key_hint, is_cluster_key, normalize_key
from bot.grammar.lexing import CommandError, Scalar, _Command, _flags, _key_values, _slug, parse_scalar

_KEY_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


class RunCommand(_Command):
    """`run recipe=NAME [preset=P[,P2…]] [KEY=VALUE …] [--dry-run]`."""

    name: Literal["run"] = "run"
    recipe: str
    presets: list[str] = Field(default_factory=list)
    overrides: dict[str, Scalar] = Field(default_factory=dict)
    dry_run: bool = False


def _parse_run(tokens: list[str]) -> RunCommand:
    usage = "run recipe=NAME [preset=P[,P2…]] [KEY=VALUE …] [--dry-run]"
    positional, pairs = _key_values(tokens, "run")
    words, flags = _flags(positional, ("--dry-run",), "run")
    if words:
        raise CommandError(f"{words[0]!r} is not KEY=VALUE; usage: {usage}")
    recipe = pairs.pop("recipe", None)
    if recipe is None:
        raise CommandError(f"`run` needs recipe=NAME (see /finetune recipes); usage: {usage}")
    _slug(recipe, "recipe")
    presets: list[str] = []
    if "preset" in pairs and "presets" in pairs:
        raise CommandError("give presets once, as preset=a,b")
    raw_presets = pairs.pop("preset", None) or pairs.pop("presets", None)
    if raw_presets is not None:
        for name in raw_presets.split(","):
            name = name.strip()
            if not name:
                raise CommandError("empty preset name in preset=…; write preset=a,b")
            _slug(name, "preset")
            if name in presets:
                raise CommandError(f"preset {name} is listed twice")
            presets.append(name)
    overrides: dict[str, Scalar] = {}
    for key, value in pairs.items():
        folded = normalize_key(key)
        if is_cluster_key(key):
            hint = cluster_key_hint(key, value)
            raise CommandError(
                f"{key}={value} is a cluster setting; cluster settings come from presets: try {hint}",
                suggestions=[hint.removeprefix("preset=")] if hint.startswith("preset=") else [],
            )
        if folded in PINNED_KEYS:
            raise CommandError(f"{key} is pinned by the recipe and cannot be overridden; choose another recipe")
        if not _KEY_RE.match(key):
            raise CommandError(f"{key!r} is not a training key (lower-case letters, digits and _)")
        try:
            overrides[key] = parse_scalar(value)
        except CommandError as exc:
            raise CommandError(f"{key}: {exc.message}") from None
    return RunCommand(recipe=recipe, presets=presets, overrides=overrides, dry_run="--dry-run" in flags)
