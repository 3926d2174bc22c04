"""Deliveries: every Slack delivery's key, so that a second delivery is a no-op."""

from __future__ import annotations

from sqlmodel import Session

from storage.models import Delivery, utcnow
from storage.repos.common import dialect_insert


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
