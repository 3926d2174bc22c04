"""The card's line of how long a run waited, ran and what it used. Pure."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.slack.blocks import human_duration
from storage.models import Run


def durations_line(run: Run, now: datetime) -> str | None:
    """`waited 12 s · ran 3 min 4 s` (`waited 40 s so far`, `… · running for 2 min`); None before submission."""
    if run.polyaxon_uuid is None:
        return None
    created, started, finished = run.created_at, run.started_at, run.finished_at
    if started is None:
        return f"waited {human_duration(((finished or now) - created).total_seconds())}" + (
            "" if finished else " so far"
        )
    waited = f"waited {human_duration((started - created).total_seconds())}"
    if finished is None:
        return f"{waited} · running for {human_duration((now - started).total_seconds())}"
    return f"{waited} · ran {human_duration(ran_seconds(run))}{used_text(run.cost)}"


def ran_seconds(run: Run) -> float:
    """How long an ended run ran: as the usage service measured it when it settled the run (what its hours
    count: `bot.usage.accounting.running_seconds`), else Polyaxon's stamps (a run without a cost profile)."""
    used = (run.cost or {}).get("used_s")
    if isinstance(used, int | float):
        return float(used)
    if run.started_at is None or run.finished_at is None:
        return 0.0
    return (run.finished_at - run.started_at).total_seconds()


def used_text(cost: dict[str, Any] | None) -> str:
    """` · used 0.0021 accelerator-hours (1 accelerator, 0.01 USD)`: what an ended run used, once the usage
    service settled it: the running time shown × what its presets hold."""
    if not cost or cost.get("used_hours") is None:
        return ""
    hours = float(cost["used_hours"])
    unit = str(cost.get("unit") or "accelerator")
    count = float(cost.get("count") or 0)
    held = f"{count:g} {unit}{'s' * (count != 1)}"
    money = f", {float(cost['used_money']):,.2f} {cost.get('currency') or ''}".rstrip() if "used_money" in cost else ""
    shown = f"{hours:,.1f}" if hours >= 10 else f"{hours:.3g}"
    return f" · used {shown} {unit}-hours ({held}{money})"
