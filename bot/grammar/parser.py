"""The whole command line: which subcommand it names, then that subcommand's own parser."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated

from pydantic import Field

from bot.grammar.digest import DigestCommand, _parse_digest
from bot.grammar.evaluate import EvalCommand, _parse_eval
from bot.grammar.help import HelpCommand, PresetsCommand, RecipesCommand, _parse_help, _parse_presets, _parse_recipes
from bot.grammar.lexing import MAX_TEXT, CommandError, _split, closest, did_you_mean, refuse_shell_syntax
from bot.grammar.lifecycle import (
    CompareCommand,
    LogsCommand,
    OutputsCommand,
    ResumeCommand,
    StatusCommand,
    StopCommand,
    _parse_compare,
    _parse_logs,
    _parse_outputs,
    _parse_resume,
    _parse_status,
    _parse_stop,
)
from bot.grammar.registration import RegisterCommand, TraceCommand, _parse_register, _parse_trace
from bot.grammar.release import PromoteCommand, RollbackCommand, _parse_promote, _parse_rollback
from bot.grammar.run import PreflightCommand, RunCommand, _parse_preflight, _parse_run
from bot.grammar.sweep import SweepCommand, _parse_sweep
from bot.grammar.usage import BudgetCommand, UsageCommand, _parse_budget, _parse_usage

Command = Annotated[
    RunCommand
    | StatusCommand
    | LogsCommand
    | CompareCommand
    | StopCommand
    | ResumeCommand
    | OutputsCommand
    | EvalCommand
    | PreflightCommand
    | SweepCommand
    | RegisterCommand
    | RecipesCommand
    | PresetsCommand
    | DigestCommand
    | TraceCommand
    | PromoteCommand
    | RollbackCommand
    | UsageCommand
    | BudgetCommand
    | HelpCommand,
    Field(discriminator="name"),
]


def _parse_help_topic(tokens: list[str]) -> HelpCommand:
    return _parse_help(tokens, SUBCOMMANDS)


# One parser per subcommand, in the order `help` lists them: a new subcommand is its own module, a line here
# and its command in `Command`.
_PARSERS: dict[str, Callable[[list[str]], Command]] = {
    "run": _parse_run,
    "status": _parse_status,
    "logs": _parse_logs,
    "compare": _parse_compare,
    "stop": _parse_stop,
    "resume": _parse_resume,
    "outputs": _parse_outputs,
    "eval": _parse_eval,
    "preflight": _parse_preflight,
    "sweep": _parse_sweep,
    "register": _parse_register,
    "recipes": _parse_recipes,
    "presets": _parse_presets,
    "digest": _parse_digest,
    "trace": _parse_trace,
    "promote": _parse_promote,
    "rollback": _parse_rollback,
    "usage": _parse_usage,
    "budget": _parse_budget,
    "help": _parse_help_topic,
}

SUBCOMMANDS: tuple[str, ...] = tuple(_PARSERS)


def parse_command(text: str) -> Command:
    """Parse the text of a `/finetune` command into a typed command, or raise `CommandError`."""
    if len(text) > MAX_TEXT:
        raise CommandError(f"the command is too long ({len(text)} characters, at most {MAX_TEXT})")
    refuse_shell_syntax(text)
    tokens = _split(text)
    if tokens and tokens[0].lower() == "/finetune":
        tokens = tokens[1:]
    if not tokens:
        return HelpCommand()
    subcommand = tokens[0].lower()
    if subcommand in ("-h", "--help"):
        return _parse_help_topic(tokens[1:])
    if subcommand not in SUBCOMMANDS:
        suggestions = closest(subcommand, SUBCOMMANDS)
        raise CommandError(
            f"no subcommand {tokens[0]!r}{did_you_mean(suggestions)} (try /finetune help)", suggestions=suggestions
        )
    return _PARSERS[subcommand](tokens[1:])
