"""Preflights: which recipe, pins and presets were validated by which run, and its report."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlmodel import Session, col, select

from storage.models import Preflight, Run, utcnow


def create_preflight(session: Session, **fields: Any) -> Preflight:
    """Record a preflight as it is submitted (status `running`)."""
    preflight = Preflight(**fields)
    session.add(preflight)
    session.commit()
    session.refresh(preflight)
    return preflight


def preflight_for_run(session: Session, *, run_id: int) -> Preflight | None:
    """The preflight a run carries out, or None for a training run."""
    return session.exec(select(Preflight).where(Preflight.run_id == run_id)).first()


def passed_preflight(session: Session, *, gate_key: str) -> Preflight | None:
    """The newest passed preflight of this gate key, or None."""
    statement = (
        select(Preflight)
        .where(Preflight.gate_key == gate_key, Preflight.status == "passed")
        .order_by(col(Preflight.finished_at).desc(), col(Preflight.id).desc())
    )
    return session.exec(statement).first()


def latest_preflight(session: Session, *, gate_key: str) -> Preflight | None:
    """The newest preflight of this gate key whatever its outcome, or None."""
    statement = select(Preflight).where(Preflight.gate_key == gate_key).order_by(col(Preflight.id).desc())
    return session.exec(statement).first()


def finish_preflight(
    session: Session, preflight: Preflight, *, status: str, report: dict[str, Any] | None
) -> Preflight:
    """Record the outcome (`passed` or `failed`) and the report's evidence once; later calls change nothing."""
    if preflight.status != "running":
        return preflight
    preflight.status = status
    preflight.report = report
    preflight.finished_at = utcnow()
    session.add(preflight)
    session.commit()
    session.refresh(preflight)
    return preflight


def running_preflights(session: Session) -> Sequence[tuple[Preflight, Run]]:
    """Preflights still waiting for their run's outcome, with the run."""
    statement = (
        select(Preflight, Run)
        .join(Run, col(Run.id) == col(Preflight.run_id))
        .where(Preflight.status == "running")
        .order_by(col(Preflight.id))
    )
    return list(session.exec(statement).all())


def confirmed_run_with_pins(session: Session, *, recipe_name: str, pins: dict[str, Any]) -> Run | None:
    """The newest confirmed training run of this recipe with exactly these pins (the smoke-first gate of sweeps)."""
    statement = (
        select(Run)
        .where(Run.recipe_name == recipe_name, Run.kind == "train", col(Run.outputs_confirmed_at).is_not(None))
        .where(Run.status != "lost")  # confirmed once, but Polyaxon no longer has it: no evidence
        .order_by(col(Run.outputs_confirmed_at).desc())
    )
    for run in session.exec(statement).all():
        if run.pins == pins:
            return run
    return None
