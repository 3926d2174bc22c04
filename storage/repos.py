"""Repository functions: each takes a Session and keyword arguments; no SQL lives in handlers."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement
from sqlalchemy.dialects import postgresql, sqlite
from sqlmodel import Session, col, func, or_, select, update

from storage.models import (
    Approval,
    ApprovalNotice,
    ApprovalRequest,
    AuditEntry,
    Delivery,
    DigestPost,
    DigestSchedule,
    PostedMessage,
    Registration,
    Run,
    StatusEvent,
    utcnow,
)

ACTIVE_STATUSES = frozenset(
    {
        "planned",
        "submitting",
        "pending_submit",
        "created",
        "compiled",
        "queued",
        "scheduled",
        "starting",
        "running",
        "processing",
        "retrying",
        "warning",
        "unschedulable",
        "on_schedule",
        "stopping",
        "resuming",
    }
)
TERMINAL_STATUSES = frozenset({"succeeded", "failed", "stopped", "skipped", "upstream_failed", "done", "submit_failed"})


class DuplicateError(Exception):
    """A row with the same unique key exists already."""


def dialect_insert(session: Session, table: Any) -> Any:
    """The dialect's INSERT, which has ON CONFLICT DO NOTHING on SQLite and PostgreSQL alike."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        return postgresql.insert(table)
    if dialect == "sqlite":
        return sqlite.insert(table)
    raise ValueError(f"unsupported dialect {dialect}")  # pragma: no cover - only SQLite and PostgreSQL


# --- deliveries -------------------------------------------------------------------------------


def record_delivery(session: Session, *, key: str, kind: str) -> bool:
    """Record a Slack delivery; True when it is new, False when it was seen before.

    INSERT … ON CONFLICT DO NOTHING makes two concurrent writers race-free: exactly one row, and the
    loser gets a clean False rather than an IntegrityError.
    """
    values = {"key": key, "kind": kind, "received_at": utcnow()}
    table = Delivery.__table__  # type: ignore[attr-defined]
    stmt = dialect_insert(session, table).values(**values).on_conflict_do_nothing(index_elements=["key"])
    # RETURNING tells the winner apart portably; rowcount is unreliable once the cursor is closed.
    inserted = session.execute(stmt.returning(table.c.id)).scalar_one_or_none()
    session.commit()
    return inserted is not None


# --- runs -------------------------------------------------------------------------------------


def create_run(session: Session, **fields: Any) -> Run:
    """Insert a run; raise DuplicateError when its name (the idempotency key) exists."""
    if get_run_by_name(session, name=fields["name"]) is not None:
        raise DuplicateError(f"run {fields['name']!r} exists already")
    run = Run(**fields)
    session.add(run)
    session.flush()
    return run


def get_run(session: Session, *, run_id: int) -> Run | None:
    """The run with this database id."""
    return session.get(Run, run_id)


def get_run_by_name(session: Session, *, name: str) -> Run | None:
    """The run with this name (idempotency key)."""
    return session.exec(select(Run).where(Run.name == name)).first()


def find_runs(session: Session, *, ref: str) -> Sequence[Run]:
    """Runs matching a user's reference: full uuid, its first 8 characters, or a run name."""
    ref = ref.strip()
    conditions: list[ColumnElement[bool]] = [col(Run.name) == ref, col(Run.polyaxon_uuid) == ref]
    if len(ref) == 8:
        conditions.append(col(Run.polyaxon_uuid).startswith(ref))
    return session.exec(select(Run).where(or_(*conditions)).order_by(col(Run.id))).all()


def list_active_runs(session: Session, *, requester: str | None = None) -> Sequence[Run]:
    """Runs not yet in a terminal state, optionally only one requester's."""
    stmt = select(Run).where(col(Run.status).in_(ACTIVE_STATUSES))
    if requester is not None:
        stmt = stmt.where(Run.requester == requester)
    return session.exec(stmt.order_by(col(Run.id))).all()


def list_recent_runs(session: Session, *, limit: int = 100) -> Sequence[Run]:
    """The newest runs, newest first."""
    return session.exec(select(Run).order_by(col(Run.id).desc()).limit(limit)).all()


def update_run(session: Session, run: Run, **fields: Any) -> Run:
    """Set fields on a run and bump updated_at."""
    for key, value in fields.items():
        setattr(run, key, value)
    run.updated_at = utcnow()
    session.add(run)
    session.flush()
    return run


def record_status(
    session: Session, run: Run, *, status: str, message: str | None = None, at: datetime | None = None
) -> StatusEvent | None:
    """Store a transition and set the run's status; None when the run already has that status."""
    if run.status == status:
        return None
    event = StatusEvent(
        run_id=run.id or 0, status=status, previous_status=run.status, message=message, observed_at=at or utcnow()
    )
    run.status = status
    run.updated_at = utcnow()
    if status in TERMINAL_STATUSES and run.finished_at is None:
        run.finished_at = event.observed_at
    session.add(run)
    session.add(event)
    session.flush()
    return event


def list_status_events(session: Session, *, run_id: int) -> Sequence[StatusEvent]:
    """A run's transitions, oldest first."""
    return session.exec(select(StatusEvent).where(StatusEvent.run_id == run_id).order_by(col(StatusEvent.id))).all()


def unposted_status_events(session: Session) -> Sequence[tuple[StatusEvent, Run]]:
    """Transitions recorded but not yet told in their run's thread (a crash between the two)."""
    return session.exec(
        select(StatusEvent, Run)
        .join(Run, col(Run.id) == col(StatusEvent.run_id))
        .where(col(StatusEvent.posted_ts).is_(None), col(Run.thread_ts).is_not(None))
        .order_by(col(StatusEvent.id))
    ).all()


def mark_status_event_posted(session: Session, *, event_id: int, ts: str) -> None:
    """Remember the thread message that told a transition."""
    event = session.get(StatusEvent, event_id)
    if event is not None:
        event.posted_ts = ts
        session.add(event)
        session.flush()


# --- posted messages --------------------------------------------------------------------------


def record_posted_message(
    session: Session, *, channel: str, ts: str, purpose: str, run_id: int | None = None, thread_ts: str | None = None
) -> PostedMessage:
    """Remember a message the bot posted."""
    msg = PostedMessage(channel=channel, ts=ts, purpose=purpose, run_id=run_id, thread_ts=thread_ts)
    session.add(msg)
    session.flush()
    return msg


def get_posted_message(session: Session, *, channel: str, ts: str) -> PostedMessage | None:
    """The bot's message at (channel, ts), if it is one of ours."""
    return session.exec(select(PostedMessage).where(PostedMessage.channel == channel, PostedMessage.ts == ts)).first()


# --- approvals and registrations --------------------------------------------------------------


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


def create_registration(session: Session, **fields: Any) -> Registration:
    """Insert a registration; raise DuplicateError when model+version exists."""
    if get_registration(session, model=fields["model"], version=fields["version"]) is not None:
        raise DuplicateError(f"{fields['model']}:{fields['version']} is registered already")
    registration = Registration(**fields)
    session.add(registration)
    session.flush()
    return registration


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
) -> Sequence[ApprovalRequest]:
    """Approval requests, oldest first, filtered by status, run, model and expiry at or before `expires_by`."""
    stmt = select(ApprovalRequest)
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
        or_(
            col(ApprovalRequest.status).in_(["approved", "registering"]),
            (col(ApprovalRequest.status) == "registered") & col(ApprovalRequest.recorded_at).is_(None),
        )
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
    stmt = (
        dialect_insert(session, table)
        .values(**values)
        .on_conflict_do_nothing(index_elements=["request_id", "user", "code"])
    )
    inserted = session.execute(stmt.returning(table.c.id)).scalar_one_or_none()
    session.commit()
    return inserted is not None


def list_registrations(session: Session, *, model: str) -> Sequence[Registration]:
    """A model's registrations, oldest first."""
    return session.exec(select(Registration).where(Registration.model == model).order_by(col(Registration.id))).all()


def get_registration(session: Session, *, model: str, version: str) -> Registration | None:
    """The registration of model:version."""
    return session.exec(
        select(Registration).where(Registration.model == model, Registration.version == version)
    ).first()


def registration_for_request(session: Session, *, request_id: int) -> Registration | None:
    """The registration an approval request led to, if any."""
    return session.exec(select(Registration).where(Registration.request_id == request_id)).first()


def list_audit_for_run(session: Session, *, run_id: int) -> Sequence[AuditEntry]:
    """A run's audit entries, oldest first."""
    return session.exec(select(AuditEntry).where(AuditEntry.run_id == run_id).order_by(col(AuditEntry.id))).all()


# --- digests and audit ------------------------------------------------------------------------


def upsert_digest_schedule(
    session: Session, *, channel: str, cron: str, timezone: str, created_by: str
) -> DigestSchedule:
    """Create or replace a channel's digest schedule."""
    schedule = session.exec(select(DigestSchedule).where(DigestSchedule.channel == channel)).first()
    if schedule is None:
        schedule = DigestSchedule(channel=channel, cron=cron, timezone=timezone, created_by=created_by)
    else:
        schedule.cron, schedule.timezone, schedule.created_by = cron, timezone, created_by
    session.add(schedule)
    session.flush()
    return schedule


def delete_digest_schedule(session: Session, *, channel: str) -> bool:
    """Remove a channel's digest schedule; False when it had none."""
    schedule = session.exec(select(DigestSchedule).where(DigestSchedule.channel == channel)).first()
    if schedule is None:
        return False
    session.delete(schedule)
    session.flush()
    return True


def list_digest_schedules(session: Session) -> Sequence[DigestSchedule]:
    """Every channel's digest schedule."""
    return session.exec(select(DigestSchedule).order_by(col(DigestSchedule.channel))).all()


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


def claim_digest_slot(session: Session, *, channel: str, slot_at: datetime, kind: str) -> int | None:
    """Claim a channel's digest slot; the claim's id, or None when another process claimed it first."""
    values = {"channel": channel, "slot_at": slot_at, "kind": kind, "claimed_at": utcnow(), "late": False}
    table = DigestPost.__table__  # type: ignore[attr-defined]
    stmt = dialect_insert(session, table).values(**values).on_conflict_do_nothing(index_elements=["channel", "slot_at"])
    claimed = session.execute(stmt.returning(table.c.id)).scalar_one_or_none()
    session.commit()
    return int(claimed) if claimed is not None else None


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
    """One query: the channel's runs that finished or were created since `since`, and its stuck runs."""
    stmt = select(Run).where(
        Run.channel == channel,
        or_(
            col(Run.finished_at) >= since,
            col(Run.created_at) >= since,
            col(Run.stuck_flagged_at).is_not(None) & col(Run.status).in_(ACTIVE_STATUSES),
        ),
    )
    return session.exec(stmt.order_by(col(Run.id))).all()


def open_approval_requests(session: Session, *, channel: str) -> Sequence[tuple[ApprovalRequest, Run, list[str]]]:
    """Two queries: the channel's open approval requests with their run and the users who approved so far."""
    rows = session.exec(
        select(ApprovalRequest, Run)
        .join(Run, col(Run.id) == col(ApprovalRequest.run_id))
        .where(ApprovalRequest.channel == channel, ApprovalRequest.status == "open")
        .order_by(col(ApprovalRequest.created_at))
    ).all()
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
