"""Log follows: one streaming follow per run across replicas, claimed by a conditional UPDATE, renewed as a lease.

A follow is claimed when its run has no row (the INSERT of the first claimer wins), or its row has stopped, or
its holder stopped renewing (dead). The claim reads the row, then updates it only if it is still what was read:
of two claimers the second updates nothing. The holder renews at every poll and records how far it got in the
same UPDATE, which matches only while it still holds the row: a follower that was taken over learns so there.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from storage.models import LogFollow
from storage.repos.common import dialect_insert

STREAMING = "streaming"
STOPPED = "stopped"


@dataclass(frozen=True)
class Claim:
    """A follow this process now holds, and the message a dead holder left streaming (to close), if any."""

    follow: LogFollow
    orphaned_ts: str | None


def get_follow(session: Session, *, run_id: int) -> LogFollow | None:
    """The run's follow row, streaming or stopped, or None."""
    return session.exec(select(LogFollow).where(LogFollow.run_id == run_id)).first()


def claim_follow(
    session: Session,
    *,
    run_id: int,
    requester: str,
    channel: str,
    thread_ts: str,
    holder: str,
    now: datetime,
    ttl: timedelta,
    deadline: datetime,
) -> Claim | None:
    """A new follow of the run for `holder`; None while another live holder streams it."""
    table = LogFollow.__table__  # type: ignore[attr-defined]
    fresh = {
        "requester": requester,
        "channel": channel,
        "thread_ts": thread_ts,
        "state": STREAMING,
        "holder": holder,
        "lease_until": now + ttl,
        "stream_ts": None,
        "segment_started_at": None,
        "lines_sent": None,
        "started_at": now,
        "deadline": deadline,
        "reason": None,
        "stopped_at": None,
    }
    row = get_follow(session, run_id=run_id)
    if row is None:
        inserted = session.execute(
            dialect_insert(session, table)
            .values(run_id=run_id, **fresh)
            .on_conflict_do_nothing(index_elements=["run_id"])
            .returning(table.c.id)
        ).scalar_one_or_none()
        session.commit()
        if inserted is None:
            return None
        return Claim(_reread(session, int(inserted)), None)
    if row.state == STREAMING and row.lease_until >= now:
        return None
    orphaned = row.stream_ts if row.state == STREAMING else None
    return _take(session, row, now=now, values=fresh, orphaned_ts=orphaned)


def orphaned_follows(session: Session, *, now: datetime, limit: int = 50) -> list[LogFollow]:
    """Follows still streaming whose holder stopped renewing (a process that died or stopped)."""
    query = (
        select(LogFollow)
        .where(LogFollow.state == STREAMING, col(LogFollow.lease_until) < now)
        .order_by(col(LogFollow.lease_until))
        .limit(limit)
    )
    return list(session.exec(query))


def take_over_follow(session: Session, row: LogFollow, *, holder: str, now: datetime, ttl: timedelta) -> Claim | None:
    """A dead holder's follow for `holder`, where it left off; None when another replica took it first."""
    return _take(session, row, now=now, values={"holder": holder, "lease_until": now + ttl}, orphaned_ts=row.stream_ts)


def renew_follow(
    session: Session, *, follow_id: int, holder: str, now: datetime, ttl: timedelta, **progress: Any
) -> bool:
    """Renew the holder's lease and record its progress (`lines_sent`, `stream_ts`, …); False once it lost it."""
    table = LogFollow.__table__  # type: ignore[attr-defined]
    renewed = session.execute(
        sa.update(table)
        .where(table.c.id == follow_id, table.c.holder == holder, table.c.state == STREAMING)
        .values(lease_until=now + ttl, **progress)
        .returning(table.c.id)
    ).scalar_one_or_none()
    session.commit()
    return renewed is not None


def stop_follow(session: Session, *, follow_id: int, holder: str, now: datetime, reason: str, **progress: Any) -> bool:
    """Record the follow stopped, why, and how far it got; False when the holder no longer held it."""
    table = LogFollow.__table__  # type: ignore[attr-defined]
    stopped = session.execute(
        sa.update(table)
        .where(table.c.id == follow_id, table.c.holder == holder, table.c.state == STREAMING)
        .values(state=STOPPED, reason=reason[:300], stopped_at=now, lease_until=now, **progress)
        .returning(table.c.id)
    ).scalar_one_or_none()
    session.commit()
    return stopped is not None


def release_follow(session: Session, *, follow_id: int, holder: str, now: datetime) -> None:
    """A clean shutdown: the lease ends now, so another replica (or this one restarted) takes the follow over."""
    table = LogFollow.__table__  # type: ignore[attr-defined]
    session.execute(
        sa.update(table)
        .where(table.c.id == follow_id, table.c.holder == holder, table.c.state == STREAMING)
        .values(lease_until=now - timedelta(microseconds=1))
    )
    session.commit()


def _take(
    session: Session, row: LogFollow, *, now: datetime, values: dict[str, Any], orphaned_ts: str | None
) -> Claim | None:
    table = LogFollow.__table__  # type: ignore[attr-defined]
    # Matches only the row as read: a claimer that came between changed its holder or its lease.
    taken = session.execute(
        sa.update(table)
        .where(
            table.c.id == row.id,
            table.c.holder == row.holder,
            table.c.lease_until == row.lease_until,
            table.c.state == row.state,
            sa.or_(table.c.state == STOPPED, table.c.lease_until < now),
        )
        .values(**values)
        .returning(table.c.id)
    ).scalar_one_or_none()
    session.commit()
    if taken is None:
        return None
    assert row.id is not None
    return Claim(_reread(session, row.id), orphaned_ts)


def _reread(session: Session, follow_id: int) -> LogFollow:
    session.expire_all()
    row = session.get(LogFollow, follow_id)
    assert row is not None
    session.expunge(row)
    return row
