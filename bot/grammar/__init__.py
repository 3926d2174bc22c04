"""The `/finetune` command language: text in, a typed command or a `CommandError` out.

Pure: no Slack, no Polyaxon, no catalog. The parser knows the grammar of DESIGN.md and the
static list of cluster keys; which recipe keys exist, their types and bounds, and the recipe
and preset names are the catalog's business (`bot.catalog.PlanError`).

Each subcommand family keeps its command model and its parser side by side (`run`, `lifecycle`,
`registration`, `release`, `digest`, `help`, `sweep`, `evaluate`); `lexing` holds what they share, `keys` the
cluster and pinned key lists, and `parser` ties them together.
"""

from bot.grammar.digest import DigestCommand
from bot.grammar.evaluate import EvalCommand
from bot.grammar.help import HelpCommand, PresetsCommand, RecipesCommand
from bot.grammar.keys import (
    CLUSTER_KEYS,
    PINNED_KEYS,
    cluster_key_hint,
    is_cluster_key,
    normalize_key,
    pinned_key_message,
)
from bot.grammar.lexing import (
    MAX_INT_DIGITS,
    CommandError,
    Scalar,
    closest,
    did_you_mean,
    int_written_as_float,
    is_plain_value,
    parse_scalar,
    refuse_shell_syntax,
    scalar_text,
)
from bot.grammar.lifecycle import (
    CompareCommand,
    LogsCommand,
    OutputsCommand,
    ResumeCommand,
    StatusCommand,
    StopCommand,
)
from bot.grammar.parser import SUBCOMMANDS, Command, parse_command
from bot.grammar.registration import RegisterCommand, TraceCommand
from bot.grammar.release import STAGES, PromoteCommand, RollbackCommand
from bot.grammar.run import NOTIFY_CHOICES, Notify, PreflightCommand, RunCommand, parse_notify, wants_run_form
from bot.grammar.sweep import SweepAxis, SweepCommand
from bot.grammar.usage import BudgetCommand, UsageCommand

__all__ = [
    "CLUSTER_KEYS",
    "MAX_INT_DIGITS",
    "NOTIFY_CHOICES",
    "PINNED_KEYS",
    "STAGES",
    "SUBCOMMANDS",
    "BudgetCommand",
    "Command",
    "CommandError",
    "CompareCommand",
    "DigestCommand",
    "EvalCommand",
    "HelpCommand",
    "LogsCommand",
    "Notify",
    "OutputsCommand",
    "PreflightCommand",
    "PresetsCommand",
    "PromoteCommand",
    "RecipesCommand",
    "RegisterCommand",
    "ResumeCommand",
    "RollbackCommand",
    "RunCommand",
    "Scalar",
    "StatusCommand",
    "StopCommand",
    "SweepAxis",
    "SweepCommand",
    "TraceCommand",
    "UsageCommand",
    "closest",
    "cluster_key_hint",
    "did_you_mean",
    "int_written_as_float",
    "is_cluster_key",
    "is_plain_value",
    "normalize_key",
    "parse_command",
    "parse_notify",
    "parse_scalar",
    "pinned_key_message",
    "refuse_shell_syntax",
    "scalar_text",
    "wants_run_form",
]
