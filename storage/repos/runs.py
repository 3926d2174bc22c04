"""Runs and their status transitions, and which statuses count as active or terminal."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, update
from sqlalchemy import select as sql_select
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, and_, col, or_, select

from storage.models import Run, StatusEvent, utcnow
from storage.repos.common import DuplicateError

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
        "awaiting_approval",
    }
)
# Polyaxon no longer has the run (deleted there, or the server was replaced): the bot's own terminal status, told
# once; nothing reads the run from Polyaxon again and no gate takes it as evidence.
LOST_STATUS = "lost"
TERMINAL_STATUSES = frozenset(
    {"succeeded", "failed", "stopped", "skipped", "upstream_failed", "done", "submit_failed", LOST_STATUS}
)


def create_run(session: Session, **fields: Any) -> Run:
    """Insert a run; raise DuplicateError when its name (the idempotency key) exists."""
    if get_run_by_name(session, name=fields["name"]) is not None:
        raise DuplicateError(f"run {fields['name']!r} exists already")
    run = Run(**fields)
    session.add(run)
    try:
        session.flush()
    except IntegrityError as exc:
        # Another writer took the name, or the same attempt of a retried run, between the check and the insert.
        raise DuplicateError(f"run {fields['name']!r} (attempt {fields.get('attempt', 1)}) exists already") from exc
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
    if len(ref) == 8 and ref.isalnum():
        # A prefix as a range on the unique index of uuids (LIKE 'abc%' scans on PostgreSQL's default collation).
        upper = ref[:-1] + chr(ord(ref[-1]) + 1)
        conditions.append(and_(col(Run.polyaxon_uuid) >= ref, col(Run.polyaxon_uuid) < upper))
    return session.exec(select(Run).where(or_(*conditions)).order_by(col(Run.id))).all()


def list_active_runs(session: Session, *, requester: str | None = None) -> Sequence[Run]:
    """Runs not yet in a terminal state, optionally only one requester's; a sweep's trials are its sweep's to follow."""
    stmt = select(Run).where(col(Run.status).in_(ACTIVE_STATUSES), col(Run.sweep_id).is_(None))
    if requester is not None:
        stmt = stmt.where(Run.requester == requester)
    return session.exec(stmt.order_by(col(Run.id))).all()


@dataclass(frozen=True, slots=True)
class ActiveHead:
    """What the watcher needs to know of an active run before deciding to load it whole."""

    id: int
    polyaxon_uuid: str
    status: str
    kind: str
    moved_at: datetime  # when the run last moved: its last activity, else its start, else its creation
    stuck_flagged: bool


def active_run_heads(session: Session) -> list[ActiveHead]:
    """The active runs Polyaxon has (a sweep's trials excluded), a few plain columns each: no JSON decoded."""
    columns = (Run.id, Run.polyaxon_uuid, Run.status, Run.kind, Run.last_activity_at, Run.started_at, Run.created_at)
    stmt = sql_select(*(col(c) for c in (*columns, Run.stuck_flagged_at))).where(
        col(Run.status).in_(ACTIVE_STATUSES), col(Run.sweep_id).is_(None), col(Run.polyaxon_uuid).is_not(None)
    )
    return [
        ActiveHead(row[0], row[1], row[2], row[3], row[4] or row[5] or row[6], row[7] is not None)
        for row in session.execute(stmt.order_by(col(Run.id)))
    ]


def get_runs(session: Session, ids: Sequence[int], *, chunk: int = 1000) -> list[Run]:
    """Runs by id, in id order (one statement per `chunk` ids)."""
    runs: list[Run] = []
    ordered = sorted(set(ids))
    for start in range(0, len(ordered), chunk):
        part = ordered[start : start + chunk]
        runs += session.exec(select(Run).where(col(Run.id).in_(part)).order_by(col(Run.id))).all()
    return runs


def child_runs(session: Session, *, parent_id: int, kind: str) -> Sequence[Run]:
    """The runs of `kind` whose parent is run `parent_id` (an evaluated run's evaluations), newest first."""
    query = select(Run).where(Run.parent_run_id == parent_id, Run.kind == kind)
    return session.exec(query.order_by(col(Run.id).desc())).all()


def list_recent_runs(session: Session, *, limit: int = 100) -> Sequence[Run]:
    """The newest runs, newest first."""
    return session.exec(select(Run).order_by(col(Run.id).desc()).limit(limit)).all()


def list_finished_runs(session: Session, *, requester: str, limit: int = 5) -> Sequence[Run]:
    """One requester's newest runs in a terminal state, newest first (a sweep's trials are its sweep's)."""
    stmt = select(Run).where(
        Run.requester == requester, col(Run.status).in_(TERMINAL_STATUSES), col(Run.sweep_id).is_(None)
    )
    return session.exec(stmt.order_by(col(Run.id).desc()).limit(limit)).all()


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


def unposted_status_events(session: Session, *, before: datetime | None = None) -> Sequence[tuple[StatusEvent, Run]]:
    """Transitions recorded but not yet told in their run's thread (a crash between the two).

    `before`: only events recorded before then; a younger one may be being told right now by the thread that
    recorded it (in this process or another replica), and must be left to it.
    """
    statement = (
        select(StatusEvent, Run)
        .join(Run, col(Run.id) == col(StatusEvent.run_id))
        .where(col(StatusEvent.posted_ts).is_(None), col(Run.thread_ts).is_not(None))
    )
    if before is not None:
        statement = statement.where(col(StatusEvent.observed_at) <= before)
    return session.exec(statement.order_by(col(StatusEvent.id))).all()


def mark_status_event_posted(session: Session, *, event_id: int, ts: str) -> None:
    """Remember the thread message that told a transition."""
    event = session.get(StatusEvent, event_id)
    if event is not None:
        event.posted_ts = ts
        session.add(event)
        session.flush()


def lineage_roots(session: Session, *, run_ids: Sequence[int]) -> dict[int, int]:
    """Run id -> the id of its lineage's root (the run it was resumed from, and so on up), in one query.

    A run and its resumes are one lineage; a recursive CTE walks `parent_run_id` on SQLite and PostgreSQL alike.
    """
    if not run_ids:
        return {}
    runs = Run.__table__  # type: ignore[attr-defined]
    chain = (
        sql_select(runs.c.id.label("start_id"), runs.c.id.label("id"), runs.c.parent_run_id.label("parent"))
        .where(runs.c.id.in_(list(run_ids)))
        .cte("lineage_chain", recursive=True)
    )
    step = sql_select(chain.c.start_id, runs.c.id, runs.c.parent_run_id).join(chain, runs.c.id == chain.c.parent)
    chain = chain.union_all(step)
    rows = session.execute(sql_select(chain.c.start_id, chain.c.id).where(chain.c.parent.is_(None))).all()
    return {int(start): int(root) for start, root in rows}


def claim_held_run(session: Session, *, run_id: int, from_status: str, validation: dict[str, Any]) -> bool:
    """Move a held run to `submitting` with its validation, in one conditional UPDATE: exactly one caller wins."""
    result = session.execute(
        update(Run)
        .where(col(Run.id) == run_id, col(Run.status) == from_status)
        .values(status="submitting", validation=validation, updated_at=utcnow())
    )
    session.commit()
    return bool(getattr(result, "rowcount", 0))


def failed_runs_since(session: Session, *, since: datetime) -> Sequence[Run]:
    """Runs that failed since `since` with a failure recorded (what the retry pass looks at), oldest first."""
    stmt = select(Run).where(Run.status == "failed", col(Run.failure).is_not(None), col(Run.finished_at) >= since)
    return session.exec(stmt.order_by(col(Run.id))).all()


def newest_attempt_on_card(session: Session, *, channel: str, card_ts: str) -> Run | None:
    """The newest run shown on a card: the latest attempt of a retried run (each attempt edits the first's card)."""
    stmt = select(Run).where(Run.channel == channel, Run.card_ts == card_ts).order_by(col(Run.id).desc()).limit(1)
    return session.exec(stmt).first()


def pending_submissions(session: Session, *, stale_before: datetime) -> Sequence[Run]:
    """Runs waiting for Polyaxon: `pending_submit` (it was unreachable), or `submitting` with no uuid since before
    `stale_before` (the process died in the middle), oldest first."""
    stmt = select(Run).where(
        or_(
            col(Run.status) == "pending_submit",
            and_(
                col(Run.status) == "submitting",
                col(Run.polyaxon_uuid).is_(None),
                col(Run.updated_at) < stale_before,
            ),
        )
    )
    return session.exec(stmt.order_by(col(Run.id))).all()
