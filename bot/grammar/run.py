"""`run`: a recipe, its presets and training overrides, checked against the cluster and pinned keys."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import Field

from bot.grammar.keys import PINNED_KEYS, cluster_key_hint, is_cluster_key, normalize_key, pinned_key_message
from bot.grammar.lexing import (
    CommandError,
    Scalar,
    _Command,
    _flags,
    _key_values,
    _name,
    closest,
    did_you_mean,
    parse_scalar,
)

Notify = Literal["thread", "dm", "both"]

_KEY_RE = re.compile(r"^[a-z][a-z0-9_]{0,63}$")

USAGE = (
    "run recipe=NAME [preset=P[,P2…]] [notify=thread|dm|both] [KEY=VALUE …] [--dry-run] [--force] [--skip-preflight]"
)
# How the requester hears that a run ended or needs them: a mention in its thread, a direct message, or both.
NOTIFY_KEY = "notify"
NOTIFY_CHOICES: tuple[Notify, ...] = ("thread", "dm", "both")
PREFLIGHT_USAGE = "preflight recipe=NAME [preset=P[,P2…]] [KEY=VALUE …]"


class RecipeCommand(_Command):
    """What `run` and `preflight` share: a recipe, its presets and training overrides."""

    recipe: str
    presets: list[str] = Field(default_factory=list)
    overrides: dict[str, Scalar] = Field(default_factory=dict)
    # The text of each override typed as a float, as the user wrote it: an int key refuses a float and
    # quotes this text (`seed is an int: write 1000, not 1e3`). Commands built in code leave it empty.
    written: dict[str, str] = Field(default_factory=dict)
    # What the parser read differently from what was typed (names lower-cased), said once in the reply.
    notes: list[str] = Field(default_factory=list)


class RunCommand(RecipeCommand):
    """`run recipe=NAME [preset=P[,P2…]] [KEY=VALUE …] [--dry-run] [--force] [--skip-preflight]`."""

    name: Literal["run"] = "run"
    dry_run: bool = False
    # Submit although the memory estimate is over budget; approvers only (the run service enforces it).
    force: bool = False
    # Ask to run a distributed recipe without a passed preflight: approvers only; the run is held until other
    # approvers approve it (bot.registry.skip), then shown as unvalidated.
    skip_preflight: bool = False
    # `notify=`: how the requester hears that it ended or needs them; None: their App Home default, else the thread.
    # Not a training key: it never reaches the catalog.
    notify: Notify | None = None


class PreflightCommand(RecipeCommand):
    """`preflight recipe=NAME [preset=P[,P2…]] [KEY=VALUE …]`: validate a recipe before a distributed run."""

    name: Literal["preflight"] = "preflight"


def _parse_presets(raw: str) -> tuple[list[str], list[str]]:
    """The preset names of `preset=a,b`, lower-cased, and the ones that were not lower-case as written."""
    presets: list[str] = []
    recased: list[str] = []
    for written in raw.split(","):
        written = written.strip()
        if not written:
            raise CommandError("empty preset name in preset=…; write preset=a,b")
        name = _name(written, "preset")
        if name in presets:
            raise CommandError(f"preset {name} is listed twice")
        if name != written:
            recased.append(f"preset {written} read as {name}")
        presets.append(name)
    return presets, recased


def wants_run_form(text: str) -> bool:
    """`run` and nothing else (the run form opens instead of a usage error): the one text a form answers."""
    words = text.replace("\u00a0", " ").split()
    if words and words[0].lower() == "/finetune":
        words = words[1:]
    return len(words) == 1 and words[0].lower() == "run"


def _parse_run(tokens: list[str]) -> RunCommand:
    positional, pairs = _key_values(tokens, "run")
    words, flags = _flags(positional, ("--dry-run", "--force", "--skip-preflight"), "run")
    if words:
        raise CommandError(f"{words[0]!r} is not KEY=VALUE; usage: {USAGE}")
    raw_notify = pairs.pop(NOTIFY_KEY, None)
    fields = recipe_fields(pairs, "run", USAGE)
    return RunCommand(
        **fields,
        notify=parse_notify(raw_notify) if raw_notify is not None else None,
        dry_run="--dry-run" in flags,
        force="--force" in flags,
        skip_preflight="--skip-preflight" in flags,
    )


def parse_notify(value: str) -> Notify:
    """`thread`, `dm` or `both` (any case), or a CommandError naming the valid values and the closest one."""
    wanted = value.strip().lower()
    for choice in NOTIFY_CHOICES:
        if wanted == choice:
            return choice
    suggestions = closest(wanted, NOTIFY_CHOICES, n=1)
    raise CommandError(
        f"notify={value} is not a way to tell you: notify=thread (a mention in the run's thread), notify=dm (a direct "
        f"message) or notify=both{did_you_mean([f'notify={s}' for s in suggestions])}",
        suggestions=[f"notify={s}" for s in suggestions],
    )


def _parse_preflight(tokens: list[str]) -> PreflightCommand:
    positional, pairs = _key_values(tokens, "preflight")
    words, _ = _flags(positional, (), "preflight")
    if words:
        raise CommandError(f"{words[0]!r} is not KEY=VALUE; usage: {PREFLIGHT_USAGE}")
    return PreflightCommand(**recipe_fields(pairs, "preflight", PREFLIGHT_USAGE))


def check_training_key(key: str, value: str) -> None:
    """Refuse a cluster setting (presets' business), a pinned key or a key that is not a training key's name."""
    if is_cluster_key(key):
        hint = cluster_key_hint(key, value)
        raise CommandError(
            f"{key}={value} is a cluster setting; cluster settings come from presets: try {hint}",
            suggestions=[hint.removeprefix("preset=")] if hint.startswith("preset=") else [],
        )
    if normalize_key(key) in PINNED_KEYS:
        raise CommandError(pinned_key_message(key))
    if not _KEY_RE.match(key):
        raise CommandError(f"{key!r} is not a training key (lower-case letters, digits and _)")


def recipe_fields(pairs: dict[str, str], subcommand: str, usage: str) -> dict[str, Any]:
    """The recipe, presets and training overrides of `run` and `preflight`, checked the same way."""
    raw_recipe = pairs.pop("recipe", None)
    if raw_recipe is None:
        raise CommandError(f"`{subcommand}` needs recipe=NAME (see /finetune recipes); usage: {usage}")
    recipe = _name(raw_recipe, "recipe")
    recased = [f"recipe {raw_recipe} read as {recipe}"] if recipe != raw_recipe else []
    if "preset" in pairs and "presets" in pairs:
        raise CommandError("give presets once, as preset=a,b")
    raw_presets = pairs.pop("preset", None) or pairs.pop("presets", None)
    presets: list[str] = []
    if raw_presets is not None:
        presets, recased_presets = _parse_presets(raw_presets)
        recased += recased_presets
    overrides: dict[str, Scalar] = {}
    written: dict[str, str] = {}
    for key, value in pairs.items():
        check_training_key(key, value)
        try:
            overrides[key] = parse_scalar(value)
        except CommandError as exc:
            raise CommandError(f"{key}: {exc.message}") from None
        if isinstance(overrides[key], float):
            written[key] = value
    return {
        "recipe": recipe,
        "presets": presets,
        "overrides": overrides,
        "written": written,
        "notes": [", ".join(recased) + ": names are lower-case"] if recased else [],
    }
