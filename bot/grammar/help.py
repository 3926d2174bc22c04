"""Commands that only show what there is: `recipes`, `presets` and `help`."""

from __future__ import annotations

from typing import Literal

from bot.grammar.lexing import CommandError, _Command, _no_extra, closest, did_you_mean


class RecipesCommand(_Command):
    """`recipes`."""

    name: Literal["recipes"] = "recipes"


class PresetsCommand(_Command):
    """`presets`."""

    name: Literal["presets"] = "presets"


class HelpCommand(_Command):
    """`help [SUBCOMMAND]`."""

    name: Literal["help"] = "help"
    topic: str | None = None


def _parse_no_args(tokens: list[str], subcommand: str) -> None:
    if tokens:
        raise CommandError(f"`{subcommand}` takes no arguments (got {' '.join(tokens)!r})")


def _parse_recipes(tokens: list[str]) -> RecipesCommand:
    _parse_no_args(tokens, "recipes")
    return RecipesCommand()


def _parse_presets(tokens: list[str]) -> PresetsCommand:
    _parse_no_args(tokens, "presets")
    return PresetsCommand()


def _parse_help(tokens: list[str], topics: tuple[str, ...]) -> HelpCommand:
    # The topics are the subcommands, passed in because their list is built from the parsers, this one among them.
    if not tokens:
        return HelpCommand()
    _no_extra(tokens[1:], "help SUBCOMMAND", "help [SUBCOMMAND]")
    topic = tokens[0].lower()
    if topic not in topics:
        suggestions = closest(topic, topics)
        raise CommandError(
            f"no help topic {tokens[0]!r}{did_you_mean(suggestions)} (topics: {', '.join(topics)})",
            suggestions=suggestions,
        )
    return HelpCommand(topic=topic)
