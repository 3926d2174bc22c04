"""The release path: serving checks, stage changes and the release webhook's outbox."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlmodel import Session, col, or_, select, update

from storage.models import ApprovalRequest, ReleaseEvent, Run, ServingCheck, StageChange


def create_serving_check(session: Session, **fields: Any) -> ServingCheck:
    """Insert a serving check (running, or finished at once with its report)."""
    check = ServingCheck(**fields)
    session.add(check)
    session.flush()
    return check


def get_serving_check(session: Session, *, check_id: int) -> ServingCheck | None:
    """The serving check with this id."""
    return session.get(ServingCheck, check_id)


def serving_check_for_run(session: Session, *, run_id: int) -> ServingCheck | None:
    """The serving check a run carries out, if it is one."""
    return session.exec(select(ServingCheck).where(ServingCheck.run_id == run_id)).first()


def running_serving_checks(session: Session) -> list[tuple[ServingCheck, Run]]:
    """Serving checks still waiting for their run's report, with their runs."""
    rows = session.exec(
        select(ServingCheck, Run)
        .where(ServingCheck.status == "running", ServingCheck.run_id == Run.id)
        .order_by(col(ServingCheck.id))
    ).all()
    return [(check, run) for check, run in rows]


def latest_serving_check(
    session: Session, *, registration_id: int, spec_digest: str, statuses: Sequence[str]
) -> ServingCheck | None:
    """The newest serving check of this version and serving spec in one of `statuses`."""
    return session.exec(
        select(ServingCheck)
        .where(
            ServingCheck.registration_id == registration_id,
            ServingCheck.spec_digest == spec_digest,
            col(ServingCheck.status).in_(list(statuses)),
        )
        .order_by(col(ServingCheck.id).desc())
    ).first()


def finish_serving_check(session: Session, *, check_id: int, status: str, **fields: Any) -> bool:
    """Move a running check to passed/failed in one conditional UPDATE, committed: True for the one who did."""
    stmt = (
        update(ServingCheck)
        .where(col(ServingCheck.id) == check_id, col(ServingCheck.status) == "running")
        .values(status=status, **fields)
    )
    done = session.execute(stmt).rowcount == 1  # type: ignore[attr-defined]
    session.commit()
    return done


def add_stage_change(session: Session, **fields: Any) -> StageChange:
    """Record one stage move of a version."""
    change = StageChange(**fields)
    session.add(change)
    session.flush()
    return change


def list_stage_changes(session: Session, *, model: str, registration_id: int | None = None) -> Sequence[StageChange]:
    """A model's stage changes (one version's, when given), oldest first."""
    stmt = select(StageChange).where(StageChange.model == model)
    if registration_id is not None:
        stmt = stmt.where(StageChange.registration_id == registration_id)
    return session.exec(stmt.order_by(col(StageChange.id))).all()


def stage_change_for_request(session: Session, *, request_id: int) -> StageChange | None:
    """The stage change a promotion request led to, if any."""
    return session.exec(
        select(StageChange).where(StageChange.request_id == request_id, StageChange.kind == "promote")
    ).first()


def add_release_event(session: Session, **fields: Any) -> ReleaseEvent:
    """Queue one webhook event (delivered by the release sender, in order)."""
    event = ReleaseEvent(**fields)
    session.add(event)
    session.flush()
    return event


def pending_release_events(session: Session, *, limit: int = 50) -> Sequence[ReleaseEvent]:
    """Events not yet delivered, oldest first (they go out in this order: the head waits out its backoff)."""
    return session.exec(
        select(ReleaseEvent).where(ReleaseEvent.status == "pending").order_by(col(ReleaseEvent.id)).limit(limit)
    ).all()


def list_release_events(session: Session, *, statuses: Sequence[str] | None = None) -> Sequence[ReleaseEvent]:
    """Webhook events, oldest first."""
    stmt = select(ReleaseEvent)
    if statuses is not None:
        stmt = stmt.where(col(ReleaseEvent.status).in_(list(statuses)))
    return session.exec(stmt.order_by(col(ReleaseEvent.id))).all()


def update_release_event(session: Session, *, event_id: int, **fields: Any) -> None:
    """Set fields on a webhook event, committed."""
    session.execute(update(ReleaseEvent).where(col(ReleaseEvent.id) == event_id).values(**fields))
    session.commit()


def promotion_work(session: Session) -> Sequence[ApprovalRequest]:
    """One query for the watcher: promotions approved or mid-move, and promoted ones not yet told."""
    stmt = select(ApprovalRequest).where(
        ApprovalRequest.action == "promote",
        or_(
            col(ApprovalRequest.status).in_(["approved", "promoting"]),
            (col(ApprovalRequest.status) == "promoted") & col(ApprovalRequest.recorded_at).is_(None),
        ),
    )
    return session.exec(stmt.order_by(col(ApprovalRequest.id))).all()


def waiting_promotions(session: Session) -> Sequence[ApprovalRequest]:
    """Promotion requests waiting for approval (open) or for the stage move (approved), oldest first."""
    return session.exec(
        select(ApprovalRequest)
        .where(ApprovalRequest.action == "promote", col(ApprovalRequest.status).in_(["open", "approved"]))
        .order_by(col(ApprovalRequest.id))
    ).all()
