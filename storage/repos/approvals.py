"""Approval requests, the approvals on them, and the notices told about them."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlmodel import Session, col, or_, select, update

from storage.models import Approval, ApprovalNotice, ApprovalRequest, utcnow
from storage.repos.common import insert_once


def create_approval_request(session: Session, **fields: Any) -> ApprovalRequest:
    """Insert an approval request."""
    request = ApprovalRequest(**fields)
    session.add(request)
    session.flush()
    return request


def get_approval_request_by_message(session: Session, *, channel: str, message_ts: str) -> ApprovalRequest | None:
    """The approval request posted as (channel, message_ts)."""
    return session.exec(
        select(ApprovalRequest).where(ApprovalRequest.channel == channel, ApprovalRequest.message_ts == message_ts)
    ).first()


def add_approval(session: Session, *, request_id: int, user: str, reaction: str, message_ts: str) -> Approval | None:
    """Record (or re-activate) one user's approval; None when it is already active."""
    existing = session.exec(select(Approval).where(Approval.request_id == request_id, Approval.user == user)).first()
    if existing is not None:
        if existing.revoked_at is None:
            return None
        existing.revoked_at = None
        existing.approved_at = utcnow()
        session.add(existing)
        session.flush()
        return existing
    approval = Approval(request_id=request_id, user=user, reaction=reaction, message_ts=message_ts)
    session.add(approval)
    session.flush()
    return approval


def revoke_approval(session: Session, *, request_id: int, user: str) -> Approval | None:
    """Mark a user's active approval revoked; None when there was none."""
    approval = session.exec(
        select(Approval).where(
            Approval.request_id == request_id, Approval.user == user, col(Approval.revoked_at).is_(None)
        )
    ).first()
    if approval is None:
        return None
    approval.revoked_at = utcnow()
    session.add(approval)
    session.flush()
    return approval


def active_approvals(session: Session, *, request_id: int) -> Sequence[Approval]:
    """Approvals of a request that have not been revoked."""
    return session.exec(
        select(Approval)
        .where(Approval.request_id == request_id, col(Approval.revoked_at).is_(None))
        .order_by(col(Approval.id))
    ).all()


def get_approval_request(session: Session, *, request_id: int) -> ApprovalRequest | None:
    """The approval request with this id."""
    return session.get(ApprovalRequest, request_id)


def list_approval_requests(
    session: Session,
    *,
    statuses: Sequence[str] | None = None,
    run_id: int | None = None,
    model: str | None = None,
    expires_by: datetime | None = None,
    action: str | None = None,
) -> Sequence[ApprovalRequest]:
    """Approval requests, oldest first, filtered by status, run, model, action and expiry at or before `expires_by`."""
    stmt = select(ApprovalRequest)
    if action is not None:
        stmt = stmt.where(ApprovalRequest.action == action)
    if expires_by is not None:
        stmt = stmt.where(col(ApprovalRequest.expires_at).is_not(None), col(ApprovalRequest.expires_at) <= expires_by)
    if statuses is not None:
        stmt = stmt.where(col(ApprovalRequest.status).in_(list(statuses)))
    if run_id is not None:
        stmt = stmt.where(ApprovalRequest.run_id == run_id)
    if model is not None:
        stmt = stmt.where(ApprovalRequest.model == model)
    return session.exec(stmt.order_by(col(ApprovalRequest.id))).all()


def registration_work(session: Session) -> Sequence[ApprovalRequest]:
    """One query for the watcher: requests approved or mid-registration, and registered ones not yet told.

    Registered-and-told requests (all of history) are left in the database, so a tick's cost stays flat.
    """
    stmt = select(ApprovalRequest).where(
        ApprovalRequest.action == "register",
        or_(
            col(ApprovalRequest.status).in_(["approved", "registering"]),
            (col(ApprovalRequest.status) == "registered") & col(ApprovalRequest.recorded_at).is_(None),
        ),
    )
    return session.exec(stmt.order_by(col(ApprovalRequest.id))).all()


def update_approval_request(session: Session, request: ApprovalRequest, **fields: Any) -> ApprovalRequest:
    """Set fields on an approval request."""
    for key, value in fields.items():
        setattr(request, key, value)
    session.add(request)
    session.flush()
    return request


def claim_approval_request(
    session: Session, *, request_id: int, from_statuses: Sequence[str], to_status: str, **fields: Any
) -> bool:
    """Move a request from one of `from_statuses` to `to_status` in one conditional UPDATE, committed.

    Exactly one of several concurrent callers gets True: the row claim that makes registration happen once.
    """
    stmt = (
        update(ApprovalRequest)
        .where(col(ApprovalRequest.id) == request_id, col(ApprovalRequest.status).in_(list(from_statuses)))
        .values(status=to_status, **fields)
    )
    claimed = session.execute(stmt).rowcount == 1  # type: ignore[attr-defined]
    session.commit()
    return claimed


def list_approvals(session: Session, *, request_id: int) -> Sequence[Approval]:
    """Every approval of a request, revoked ones included, oldest first."""
    return session.exec(select(Approval).where(Approval.request_id == request_id).order_by(col(Approval.id))).all()


def record_notice(session: Session, *, request_id: int, user: str, code: str) -> bool:
    """Claim telling `user` the reason `code` on a request; True only the first time (race-free)."""
    table = ApprovalNotice.__table__  # type: ignore[attr-defined]
    values = {"request_id": request_id, "user": user, "code": code, "created_at": utcnow()}
    return insert_once(session, table, values, keys=["request_id", "user", "code"]) is not None
