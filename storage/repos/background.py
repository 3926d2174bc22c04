"""The background passes' failing items: read per pass, recorded on failure, cleared on success."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import delete, func
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from storage.models import BackgroundItemFailure


def item_failures(
    session: Session, *, kind: str, keys: Sequence[str] | None = None
) -> dict[str, BackgroundItemFailure]:
    """The failing items of one pass (or only `keys` of it), by key: one query for a whole pass."""
    query = select(BackgroundItemFailure).where(BackgroundItemFailure.kind == kind)
    if keys is not None:
        query = query.where(col(BackgroundItemFailure.key).in_(list(keys)))
    return {row.key: row for row in session.exec(query)}


def record_item_failure(
    session: Session,
    *,
    kind: str,
    key: str,
    run_id: int | None,
    error: str,
    now: datetime,
    next_at: datetime,
    attempts: int,
    parked: bool,
) -> BackgroundItemFailure:
    """Insert or update the item's row with this failure (attempts as counted by the caller), committed."""
    for _ in range(2):  # a concurrent first failure of the same item wins the insert: update its row instead
        row = session.exec(
            select(BackgroundItemFailure).where(BackgroundItemFailure.kind == kind, BackgroundItemFailure.key == key)
        ).first()
        if row is None:
            row = BackgroundItemFailure(kind=kind, key=key, first_failed_at=now, last_failed_at=now, next_at=next_at)
        row.run_id = run_id if run_id is not None else row.run_id
        row.attempts = attempts
        row.last_error = error[:2000]
        row.last_failed_at = now
        row.next_at = next_at
        row.parked_at = now if parked else None
        session.add(row)
        try:
            session.commit()
        except IntegrityError:
            session.rollback()
            continue
        session.refresh(row)
        return row
    raise RuntimeError(f"could not record the failure of {kind} {key}")


def mark_item_told(session: Session, *, item_id: int, now: datetime) -> None:
    """The parked item was told where it can be."""
    row = session.get(BackgroundItemFailure, item_id)
    if row is not None:
        row.told_at = now
        session.add(row)
        session.commit()


def clear_item_failure(session: Session, *, kind: str, key: str) -> None:
    """The item went through: forget its failures."""
    session.execute(
        delete(BackgroundItemFailure).where(
            col(BackgroundItemFailure.kind) == kind, col(BackgroundItemFailure.key) == key
        )
    )
    session.commit()


def list_item_failures(
    session: Session, *, kind: str | None = None, run_id: int | None = None, parked: bool | None = None
) -> list[BackgroundItemFailure]:
    """Failing items, oldest first: of one pass, of one run, parked or still retried."""
    query = select(BackgroundItemFailure)
    if kind is not None:
        query = query.where(BackgroundItemFailure.kind == kind)
    if run_id is not None:
        query = query.where(BackgroundItemFailure.run_id == run_id)
    if parked is not None:
        parked_at = col(BackgroundItemFailure.parked_at)
        query = query.where(parked_at.is_not(None) if parked else parked_at.is_(None))
    return list(session.exec(query.order_by(col(BackgroundItemFailure.id))))


def count_item_failures(session: Session) -> list[tuple[str, bool, int]]:
    """(kind, parked?, how many) for every pass with failing items: the `/metrics` gauge."""
    parked = col(BackgroundItemFailure.parked_at).is_not(None)
    rows = session.execute(
        select(BackgroundItemFailure.kind, parked, func.count()).group_by(BackgroundItemFailure.kind, parked)
    ).all()
    return [(str(kind), bool(is_parked), int(n)) for kind, is_parked, n in rows]
