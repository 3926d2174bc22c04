"""Audit entries: who ran which command, and how it went."""

from __future__ import annotations

from collections.abc import Sequence

from sqlmodel import Session, col, select

from storage.models import AuditEntry


def add_audit(
    session: Session,
    *,
    user: str,
    command: str,
    outcome: str,
    channel: str | None = None,
    detail: str | None = None,
    run_id: int | None = None,
) -> AuditEntry:
    """Append an audit entry."""
    entry = AuditEntry(user=user, command=command, outcome=outcome, channel=channel, detail=detail, run_id=run_id)
    session.add(entry)
    session.flush()
    return entry


def list_audit(session: Session, *, user: str | None = None, limit: int = 100) -> Sequence[AuditEntry]:
    """Recent audit entries, newest first."""
    stmt = select(AuditEntry)
    if user is not None:
        stmt = stmt.where(AuditEntry.user == user)
    return session.exec(stmt.order_by(col(AuditEntry.id).desc()).limit(limit)).all()


def list_audit_for_run(session: Session, *, run_id: int) -> Sequence[AuditEntry]:
    """A run's audit entries, oldest first."""
    return session.exec(select(AuditEntry).where(AuditEntry.run_id == run_id).order_by(col(AuditEntry.id))).all()
