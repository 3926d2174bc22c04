"""Accelerator-hours: the runs that could have run in a period with their status times, budgets, notices."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlmodel import Session, col, or_, select

from storage.models import BudgetNotice, ChannelBudget, Run, StatusEvent, utcnow
from storage.repos.common import delete_rows, insert_once, upsert


def runs_in_period(
    session: Session, *, channel: str | None, start: datetime, end: datetime
) -> list[tuple[Run, list[tuple[str, datetime]]]]:
    """Two queries: runs (not sweeps, whose trials hold the accelerators) created before `end` and not finished
    before `start`, of a channel (or all), each with its status events `(status, observed_at)`, oldest first."""
    stmt = select(Run).where(
        col(Run.created_at) < end,
        or_(col(Run.finished_at).is_(None), col(Run.finished_at) >= start),
        Run.kind != "sweep",
    )
    if channel is not None:
        stmt = stmt.where(Run.channel == channel)
    runs = list(session.exec(stmt.order_by(col(Run.id))).all())
    events: dict[int, list[tuple[str, datetime]]] = {}
    ids = [run.id for run in runs if run.id is not None]
    for chunk in range(0, len(ids), 1000):
        rows = session.exec(
            select(StatusEvent)
            .where(col(StatusEvent.run_id).in_(ids[chunk : chunk + 1000]))
            .order_by(col(StatusEvent.observed_at), col(StatusEvent.id))
        ).all()
        for row in rows:
            events.setdefault(row.run_id, []).append((row.status, row.observed_at))
    return [(run, events.get(run.id or 0, [])) for run in runs]


def measured_runs(session: Session, *, recipe_name: str, limit: int = 50) -> Sequence[Run]:
    """The recipe's newest confirmed runs (outputs read back and checked): what an estimate measures from."""
    return session.exec(
        select(Run)
        .where(Run.recipe_name == recipe_name, col(Run.outputs_confirmed_at).is_not(None), Run.status == "succeeded")
        .order_by(col(Run.outputs_confirmed_at).desc())
        .limit(limit)
    ).all()


def get_budget(session: Session, *, channel: str) -> ChannelBudget | None:
    """The channel's budget, if one is set."""
    return session.exec(select(ChannelBudget).where(ChannelBudget.channel == channel)).first()


def set_budget(session: Session, *, channel: str, hours: float, period: str, set_by: str) -> None:
    """Create or replace the channel's budget, race-free (two `budget` commands may arrive together)."""
    table = ChannelBudget.__table__  # type: ignore[attr-defined]
    values = {"channel": channel, "hours": hours, "period": period, "set_by": set_by, "set_at": utcnow()}
    upsert(session, table, values, keys=["channel"], replace=["hours", "period", "set_by", "set_at"])


def delete_budget(session: Session, *, channel: str) -> bool:
    """Remove the channel's budget; whether there was one (False too when a command beside this one removed it)."""
    table = ChannelBudget.__table__  # type: ignore[attr-defined]
    return delete_rows(session, table, table.c.channel == channel)


def claim_budget_notice(session: Session, *, channel: str, period_start: datetime, level: int) -> bool:
    """Claim telling the channel it reached `level` % this period; True only the first time (race-free)."""
    table = BudgetNotice.__table__  # type: ignore[attr-defined]
    values = {"channel": channel, "period_start": period_start, "level": level, "created_at": utcnow()}
    return insert_once(session, table, values, keys=["channel", "period_start", "level"]) is not None


def release_budget_notice(session: Session, *, channel: str, period_start: datetime, level: int) -> None:
    """Give a claimed notice back (it could not be posted): the next check tells it."""
    notice = session.exec(
        select(BudgetNotice).where(
            BudgetNotice.channel == channel, BudgetNotice.period_start == period_start, BudgetNotice.level == level
        )
    ).first()
    if notice is not None:
        session.delete(notice)
