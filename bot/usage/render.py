"""The usage table, the budget's state, and the estimate's line in a plan. Pure."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from bot.slack.blocks import cap_blocks, context, escape, header, mention, section
from bot.usage.accounting import UsageRow

NOTICE_LEVEL = 80  # percent of the budget at which the channel is told, once per period


@dataclass(frozen=True)
class BudgetState:
    """A channel's budget and what is spent of it this period."""

    hours: float
    period: str
    spent: float
    start: datetime

    @property
    def share(self) -> float:
        """Spent over budget (1.0 = all of it)."""
        return self.spent / self.hours if self.hours else 0.0

    def line(self) -> str:
        """`budget 200 accelerator-hours per week: 12.4 spent (6 %), 187.6 left`."""
        left = max(0.0, self.hours - self.spent)
        return (
            f"budget {self.hours:g} accelerator-hours per {self.period}: {self.spent:,.2f} spent "
            f"({self.share:.0%}), {left:,.2f} left"
        )


def _row_line(row: UsageRow, by: str) -> str:
    who = mention(row.key) if by == "user" else f"`{escape(row.key)}`"
    parts = []
    if row.accelerator_hours:
        parts.append(f"{row.accelerator_hours:,.2f} accelerator-hours")
    if row.core_hours:
        parts.append(f"{row.core_hours:,.2f} core-hours")
    money = f" · {row.money:,.2f} {escape(str(row.currency))}" if row.priced else ""
    extra = [f"{row.retries} retr{'y' if row.retries == 1 else 'ies'}"] if row.retries else []
    extra += [f"{row.preflights} preflight{'s' * (row.preflights != 1)}"] if row.preflights else []
    runs = f"{row.runs} run{'s' * (row.runs != 1)}" + (f" ({', '.join(extra)})" if extra else "")
    return f"• {who}: {', '.join(parts) or '0'}{money} · {runs}"


def render_usage(
    rows: list[UsageRow],
    *,
    channel: str,
    period: str,
    by: str,
    start: datetime,
    now: datetime,
    budget: BudgetState | None,
) -> list[dict[str, Any]]:
    """`/finetune usage`: one line per user, recipe or preset set, the totals and the budget."""
    blocks: list[dict[str, Any]] = [header(f"Usage in this {period}, by {by}")]
    blocks.append(
        context(
            f"<#{escape(channel)}> · from {start:%Y-%m-%d %H:%M} UTC to now ({now:%Y-%m-%d %H:%M} UTC) · "
            "time in running × accelerators × replicas (core-hours on CPU presets), retries and preflights included"
        )
    )
    if not rows:
        blocks.append(section(f"Nothing ran in <#{escape(channel)}> this {period} yet."))
    else:
        blocks.append(section("\n".join(_row_line(row, by) for row in rows)))
        acc = sum(r.accelerator_hours for r in rows)
        cores = sum(r.core_hours for r in rows)
        money = sum(r.money for r in rows if r.priced)
        currency = next((r.currency for r in rows if r.priced), None)
        total = f"*Total* {acc:,.2f} accelerator-hours, {cores:,.2f} core-hours"
        blocks.append(section(total + (f" · {money:,.2f} {escape(currency)}" if currency else "")))
    if budget is not None:
        blocks.append(context(f":moneybag: {budget.line()}"))
    return cap_blocks(blocks, "…more rows than fit in one message.")


def render_budget(channel: str, budget: BudgetState | None) -> str:
    """`/finetune budget`."""
    if budget is None:
        return (
            f"<#{escape(channel)}> has no accelerator-hour budget. An approver sets one with "
            "`/finetune budget set HOURS per=week|month`."
        )
    return f":moneybag: <#{escape(channel)}>: {budget.line()} (this {budget.period} from {budget.start:%Y-%m-%d} UTC)."


def render_removed(channel: str, removed: BudgetState | None, user: str) -> str:
    """`/finetune budget off`: the removal confirmed, with what the budget was and had spent."""
    was = f" (it was {removed.line()})" if removed is not None else ""
    return (
        f":white_check_mark: Removed <#{escape(channel)}>'s accelerator-hour budget{was}, by {mention(user)}. "
        "Runs here are no longer held against a budget; `/finetune budget set HOURS per=week|month` sets one again."
    )


def top_spenders(rows: list[UsageRow], limit: int = 3) -> str | None:
    """The digest's line: the period's total and its top spenders, or None when nothing ran."""
    if not rows:
        return None
    acc = sum(r.accelerator_hours for r in rows)
    cores = sum(r.core_hours for r in rows)
    top = ", ".join(
        f"{mention(r.key)} {r.accelerator_hours:,.2f}"
        if r.accelerator_hours
        else f"{mention(r.key)} {r.core_hours:,.2f} core-h"
        for r in rows[:limit]
    )
    return f":bar_chart: Usage this period: {acc:,.2f} accelerator-hours, {cores:,.2f} core-hours · top: {top}"
