"""Sweeps: what each searches, its trials (runs with `sweep_id`), and which sweeps the watcher still follows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlmodel import Session, col, or_, select

from storage.models import Run, Sweep
from storage.repos.runs import ACTIVE_STATUSES


def create_sweep(session: Session, **fields: Any) -> Sweep:
    """Insert the sweep's record (its run exists already, in the same transaction)."""
    sweep = Sweep(**fields)
    session.add(sweep)
    session.flush()
    return sweep


def get_sweep(session: Session, *, run_id: int) -> Sweep | None:
    """The sweep whose run is `run_id`."""
    return session.exec(select(Sweep).where(Sweep.run_id == run_id)).first()


def update_sweep(session: Session, sweep: Sweep, **fields: Any) -> Sweep:
    """Set fields on a sweep."""
    for key, value in fields.items():
        setattr(sweep, key, value)
    session.add(sweep)
    session.flush()
    return sweep


def followed_sweeps(session: Session) -> Sequence[tuple[Sweep, Run]]:
    """Sweeps whose run is still active, or has ended without its final summary posted yet."""
    statement = (
        select(Sweep, Run)
        .join(Run, col(Run.id) == col(Sweep.run_id))
        .where(or_(col(Run.status).in_(ACTIVE_STATUSES), col(Sweep.summary_ts).is_(None)))
        .order_by(col(Sweep.id))
    )
    return list(session.exec(statement).all())


def sweep_trials(session: Session, *, sweep_run_id: int) -> Sequence[Run]:
    """A sweep's trials in the order Polyaxon created them (the order they were recorded)."""
    return session.exec(select(Run).where(Run.sweep_id == sweep_run_id).order_by(col(Run.id))).all()


def recent_sweeps(session: Session, *, limit: int = 50) -> Sequence[tuple[Sweep, Run]]:
    """The newest sweeps with their runs, newest first."""
    statement = (
        select(Sweep, Run).join(Run, col(Run.id) == col(Sweep.run_id)).order_by(col(Sweep.id).desc()).limit(limit)
    )
    return list(session.exec(statement).all())
