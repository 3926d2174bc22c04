"""Accelerator-hours: `usage [period=week|month] [by=user|recipe|preset]` and `budget [set HOURS per=week|month]`."""

from __future__ import annotations

import math
from typing import Literal

from bot.grammar.lexing import CommandError, _Command, _flags, _key_values, _no_extra, _only_keys, closest, did_you_mean

Period = Literal["week", "month"]
Grouping = Literal["user", "recipe", "preset"]
PERIODS: tuple[Period, ...] = ("week", "month")
GROUPINGS: tuple[Grouping, ...] = ("user", "recipe", "preset")
USAGE_USAGE = "usage [period=week|month] [by=user|recipe|preset]"
BUDGET_USAGE = "budget [set HOURS per=week|month | off]"
MAX_BUDGET_HOURS = 10_000_000.0


class UsageCommand(_Command):
    """`usage [period=week|month] [by=user|recipe|preset]`: the channel's accelerator-hours."""

    name: Literal["usage"] = "usage"
    period: Period = "week"
    by: Grouping = "user"


class BudgetCommand(_Command):
    """`budget` shows the channel's budget; `budget set HOURS per=week|month` sets it; `budget off` removes it."""

    name: Literal["budget"] = "budget"
    action: Literal["show", "set", "off"] = "show"
    hours: float | None = None
    period: Period = "week"


def _choice(value: str, allowed: tuple[str, ...], key: str, usage: str) -> str:
    lowered = value.lower()
    if lowered in allowed:
        return lowered
    suggestions = closest(lowered, allowed)
    raise CommandError(
        f"{key}={value!r} is not one of {', '.join(allowed)}{did_you_mean(suggestions)}; usage: {usage}",
        suggestions=suggestions,
    )


def _parse_usage(tokens: list[str]) -> UsageCommand:
    positional, pairs = _key_values(tokens, "usage")
    _only_keys(pairs, ("period", "by"), "usage")
    words, _ = _flags(positional, (), "usage")
    _no_extra(words, "usage", USAGE_USAGE)
    period = _choice(pairs.get("period", "week"), PERIODS, "period", USAGE_USAGE)
    by = _choice(pairs.get("by", "user"), GROUPINGS, "by", USAGE_USAGE)
    return UsageCommand(period=period, by=by)


def _parse_budget(tokens: list[str]) -> BudgetCommand:
    positional, pairs = _key_values(tokens, "budget")
    _only_keys(pairs, ("per",), "budget")
    negative = next((w for w in positional if w.startswith("-") and w[1:2].isdigit()), None)
    if negative is not None:  # not a flag: a number below zero
        raise CommandError(f"a budget is between 0 and {MAX_BUDGET_HOURS:,.0f} accelerator-hours, not {negative}")
    words, _ = _flags(positional, (), "budget")
    if not words:
        if pairs:
            raise CommandError(f"per= goes with `budget set HOURS`; usage: {BUDGET_USAGE}")
        return BudgetCommand()
    action = words[0].lower()
    if action == "off":
        _no_extra(words[1:], "budget off", BUDGET_USAGE)
        return BudgetCommand(action="off")
    if action != "set":
        suggestions = closest(action, ("set", "off"))
        raise CommandError(
            f"`budget {words[0]}`: expected `budget`, `budget set HOURS per=week|month` or `budget off`"
            f"{did_you_mean(suggestions)}",
            suggestions=suggestions,
        )
    if len(words) < 2:
        raise CommandError(
            f"`budget set` needs the accelerator-hours, e.g. `budget set 200 per=week`; usage: {BUDGET_USAGE}"
        )
    _no_extra(words[2:], "budget set HOURS", BUDGET_USAGE)
    try:
        hours = float(words[1].lower().removesuffix("h"))
    except ValueError:
        raise CommandError(f"{words[1]!r} is not a number of accelerator-hours (e.g. 200 or 12.5)") from None
    if not math.isfinite(hours) or hours <= 0 or hours > MAX_BUDGET_HOURS:
        raise CommandError(f"a budget is between 0 and {MAX_BUDGET_HOURS:,.0f} accelerator-hours, not {words[1]}")
    if "per" not in pairs:
        raise CommandError(f"`budget set` needs per=week or per=month; usage: {BUDGET_USAGE}")
    period = _choice(pairs["per"], PERIODS, "per", BUDGET_USAGE)
    return BudgetCommand(action="set", hours=hours, period=period)
