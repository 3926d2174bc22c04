"""Each person's notification default, and the direct messages told to requesters (claimed once, then sent)."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, select

from storage.columns import utcnow
from storage.models import RequesterNotice, Run, UserPreference
from storage.repos.common import insert_once, upsert


def get_notify_preference(session: Session, *, user: str) -> str | None:
    """The person's App Home default (thread, dm or both), or None when they never chose one."""
    row = session.get(UserPreference, user)
    return row.notify if row is not None else None


def set_notify_preference(session: Session, *, user: str, notify: str) -> None:
    """Store the person's default (one row per person: a second choice replaces the first, race-free)."""
    table = UserPreference.__table__  # type: ignore[attr-defined]
    upsert(
        session,
        table,
        {"user_id": user, "notify": notify, "updated_at": utcnow()},
        keys=["user_id"],
        replace=["notify", "updated_at"],
    )


def claim_requester_notice(session: Session, *, run_id: int, reason: str, text: str) -> int | None:
    """Claim the direct message about `run_id` for `reason` (committed): its id, or None when it was claimed before."""
    table = RequesterNotice.__table__  # type: ignore[attr-defined]
    values = {"run_id": run_id, "reason": reason, "text": text[:4000], "created_at": utcnow()}
    return insert_once(session, table, values, keys=["run_id", "reason"])


def mark_requester_notice_sent(session: Session, *, notice_id: int, channel: str, ts: str) -> None:
    """Slack took the message: where it is, and when."""
    row = session.get(RequesterNotice, notice_id)
    if row is not None and row.sent_at is None:
        row.channel, row.ts, row.sent_at = channel, ts, utcnow()
        session.add(row)
        session.flush()


def get_requester_notice(session: Session, *, run_id: int, reason: str) -> RequesterNotice | None:
    """The direct message about a run for a reason, if one was claimed."""
    return session.exec(
        select(RequesterNotice).where(RequesterNotice.run_id == run_id, RequesterNotice.reason == reason)
    ).first()


def unsent_requester_notices(
    session: Session, *, before: datetime, limit: int = 200
) -> list[tuple[RequesterNotice, Run]]:
    """Claimed before `before` and not sent (Slack refused, or the process died), oldest first, with their runs."""
    rows = session.exec(
        select(RequesterNotice, Run)
        .join(Run, col(Run.id) == col(RequesterNotice.run_id))
        .where(col(RequesterNotice.sent_at).is_(None), col(RequesterNotice.created_at) < before)
        .order_by(col(RequesterNotice.id))
        .limit(limit)
    ).all()
    return [(notice, run) for notice, run in rows]
