"""Workflow Builder step executions: recorded once, claimed once for completion, finished once."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, select, update

from storage.columns import utcnow
from storage.models import ServingCheck, StepExecution
from storage.repos.common import insert_once


def record_step_execution(session: Session, **fields: Any) -> bool:
    """Insert the execution unless its function_execution_id is there already; True when it is new (race-free)."""
    table = StepExecution.__table__  # type: ignore[attr-defined]
    values = {"status": "pending", "inputs": {}, "created_at": utcnow(), **fields}
    return insert_once(session, table, values, keys=["function_execution_id"]) is not None


def get_step_execution(session: Session, *, function_execution_id: str) -> StepExecution | None:
    """The execution with this Slack id."""
    return session.exec(
        select(StepExecution).where(StepExecution.function_execution_id == function_execution_id)
    ).first()


def update_step_execution(session: Session, *, function_execution_id: str, **fields: Any) -> None:
    """Set fields of a still pending execution (what it waits on), committed."""
    session.execute(
        update(StepExecution)
        .where(
            col(StepExecution.function_execution_id) == function_execution_id,
            col(StepExecution.status) == "pending",
        )
        .values(**fields)
    )
    session.commit()


def claim_step_completion(
    session: Session, *, function_execution_id: str, outputs: dict[str, Any] | None, error: str | None, now: datetime
) -> bool:
    """pending -> completing with its outcome, in one conditional UPDATE: exactly one caller chooses the outcome."""
    claimed = session.execute(
        update(StepExecution)
        .where(
            col(StepExecution.function_execution_id) == function_execution_id,
            col(StepExecution.status) == "pending",
        )
        .values(status="completing", outputs=outputs, error=error, claimed_at=now)
    )
    session.commit()
    return bool(claimed.rowcount == 1)  # type: ignore[attr-defined]


def finish_step_execution(session: Session, *, function_execution_id: str, now: datetime) -> None:
    """completing -> completed: Slack has the outcome."""
    session.execute(
        update(StepExecution)
        .where(
            col(StepExecution.function_execution_id) == function_execution_id,
            col(StepExecution.status) == "completing",
        )
        .values(status="completed", completed_at=now)
    )
    session.commit()


def list_step_executions(
    session: Session, *, statuses: Sequence[str], callback_id: str | None = None, claimed_before: datetime | None = None
) -> Sequence[StepExecution]:
    """Executions in `statuses` (of one step, claimed before a time), oldest first."""
    stmt = select(StepExecution).where(col(StepExecution.status).in_(list(statuses)))
    if callback_id is not None:
        stmt = stmt.where(StepExecution.callback_id == callback_id)
    if claimed_before is not None:
        stmt = stmt.where(col(StepExecution.claimed_at) <= claimed_before)
    return session.exec(stmt.order_by(col(StepExecution.id))).all()


def promotion_checks_since(
    session: Session, *, model: str, version: str, stage: str, since: datetime
) -> Sequence[ServingCheck]:
    """The serving checks started for a promotion of this version to this stage since `since`, oldest first."""
    return session.exec(
        select(ServingCheck)
        .where(
            ServingCheck.model == model,
            ServingCheck.version == version,
            ServingCheck.stage == stage,
            col(ServingCheck.created_at) >= since,
        )
        .order_by(col(ServingCheck.id))
    ).all()
