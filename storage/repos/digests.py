"""Digests: channels' schedules, the claimed slots and posts, and the queries a digest is composed from."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlmodel import Session, and_, col, func, not_, or_, select

from storage.models import Approval, ApprovalRequest, DigestPost, DigestSchedule, Registration, Run, Sweep, utcnow
from storage.repos.common import delete_rows, insert_once, upsert
from storage.repos.runs import ACTIVE_STATUSES, TERMINAL_STATUSES


def upsert_digest_schedule(session: Session, *, channel: str, cron: str, timezone: str, created_by: str) -> None:
    """Create or replace a channel's digest schedule, race-free (commands for one channel may arrive together)."""
    table = DigestSchedule.__table__  # type: ignore[attr-defined]
    values = {"channel": channel, "cron": cron, "timezone": timezone, "created_by": created_by, "created_at": utcnow()}
    upsert(session, table, values, keys=["channel"], replace=["cron", "timezone", "created_by"])


def delete_digest_schedule(session: Session, *, channel: str) -> bool:
    """Remove a channel's digest schedule; False when it had none (or a command beside this one removed it)."""
    table = DigestSchedule.__table__  # type: ignore[attr-defined]
    return delete_rows(session, table, table.c.channel == channel)


def get_digest_schedule(session: Session, *, channel: str) -> DigestSchedule | None:
    """The channel's digest schedule, if it has one."""
    return session.exec(select(DigestSchedule).where(DigestSchedule.channel == channel)).first()


def list_digest_schedules(session: Session) -> Sequence[DigestSchedule]:
    """Every channel's digest schedule."""
    return session.exec(select(DigestSchedule).order_by(col(DigestSchedule.channel))).all()


def claim_digest_slot(session: Session, *, channel: str, slot_at: datetime, kind: str) -> int | None:
    """Claim a channel's digest slot; the claim's id, or None when another process claimed it first."""
    values = {"channel": channel, "slot_at": slot_at, "kind": kind, "claimed_at": utcnow(), "late": False}
    table = DigestPost.__table__  # type: ignore[attr-defined]
    return insert_once(session, table, values, keys=["channel", "slot_at"])


def complete_digest_post(session: Session, *, post_id: int, message_ts: str, late: bool) -> None:
    """Record that the claimed digest was posted."""
    post = session.get(DigestPost, post_id)
    if post is None:
        raise LookupError(f"digest claim {post_id} does not exist")
    post.message_ts, post.late, post.posted_at = message_ts, late, utcnow()
    session.add(post)
    schedule = session.exec(select(DigestSchedule).where(DigestSchedule.channel == post.channel)).first()
    if schedule is not None and post.kind == "scheduled":
        schedule.last_posted_at = post.posted_at
        session.add(schedule)
    session.flush()


def release_digest_slot(session: Session, *, post_id: int) -> None:
    """Give a claim back after the post failed, so that a retry may claim it again."""
    post = session.get(DigestPost, post_id)
    if post is not None and post.posted_at is None:
        session.delete(post)
        session.flush()


def last_digest_at(session: Session, *, channel: str) -> datetime | None:
    """When the channel's last digest was posted (scheduled or on demand)."""
    return session.exec(select(func.max(DigestPost.posted_at)).where(DigestPost.channel == channel)).one()


def digest_runs(session: Session, *, channel: str, since: datetime) -> Sequence[Run]:
    """One query: the channel's runs that finished or were created since `since`, and all its active runs.

    A sweep's trials are left out: the sweep is one line, with its best trial (`digest_sweeps`).
    """
    stmt = select(Run).where(
        Run.channel == channel,
        col(Run.sweep_id).is_(None),
        or_(
            col(Run.finished_at) >= since,
            col(Run.created_at) >= since,
            col(Run.status).in_(ACTIVE_STATUSES),
        ),
    )
    return session.exec(stmt.order_by(col(Run.id))).all()


def open_approval_requests(
    session: Session, *, channel: str | None, limit: int | None = None
) -> Sequence[tuple[ApprovalRequest, Run, list[str]]]:
    """Two queries: open approval requests (of a channel, or all: `None`) with their run and who approved so far.

    A request whose run ended without ever reaching Polyaxon (a held run cancelled) waits for nothing, whatever
    its row still says: it is left out, so no digest or App Home asks anyone to decide on it.
    """
    ended_unsubmitted = and_(col(Run.status).in_(list(TERMINAL_STATUSES)), col(Run.polyaxon_uuid).is_(None))
    stmt = (
        select(ApprovalRequest, Run)
        .join(Run, col(Run.id) == col(ApprovalRequest.run_id))
        .where(ApprovalRequest.status == "open", not_(ended_unsubmitted))
        .order_by(col(ApprovalRequest.created_at))
    )
    if channel is not None:
        stmt = stmt.where(ApprovalRequest.channel == channel)
    rows = session.exec(stmt.limit(limit) if limit is not None else stmt).all()
    ids = [req.id for req, _ in rows]
    approvers: dict[int, list[str]] = {}
    if ids:
        for approval in session.exec(
            select(Approval)
            .where(col(Approval.request_id).in_(ids), col(Approval.revoked_at).is_(None))
            .order_by(col(Approval.id))
        ).all():
            approvers.setdefault(approval.request_id, []).append(approval.user)
    return [(req, run, approvers.get(req.id or 0, [])) for req, run in rows]


def digest_registrations(session: Session, *, channel: str, since: datetime) -> Sequence[tuple[Registration, Run]]:
    """One query: model versions registered since `since` from the channel's runs, oldest first."""
    return session.exec(
        select(Registration, Run)
        .join(Run, col(Run.id) == col(Registration.run_id))
        .where(Run.channel == channel, col(Registration.registered_at) >= since)
        .order_by(col(Registration.id))
    ).all()


def digest_sweeps(session: Session, *, run_ids: Sequence[int]) -> dict[int, Sweep]:
    """One query: the sweep records of those runs that are sweeps, by run id."""
    if not run_ids:
        return {}
    rows = session.exec(select(Sweep).where(col(Sweep.run_id).in_(list(run_ids)))).all()
    return {row.run_id: row for row in rows}
