"""Deliveries: every Slack delivery's key (a second delivery is a no-op), its payload and whether its work is done."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Session, col, select

from storage.models import Delivery, utcnow
from storage.repos.common import insert_once


def record_delivery(session: Session, *, key: str, kind: str) -> bool:
    """Record a Slack delivery; True when it is new, False when it was seen before.

    INSERT … ON CONFLICT DO NOTHING makes two concurrent writers race-free: exactly one row, and the
    loser gets a clean False rather than an IntegrityError.
    """
    values = {"key": key, "kind": kind, "received_at": utcnow()}
    table = Delivery.__table__  # type: ignore[attr-defined]
    return insert_once(session, table, values, keys=["key"]) is not None


def delivery_row(*, key: str, kind: str, payload: dict[str, Any], holder: str, now: datetime) -> dict[str, Any]:
    """The `deliveries` row an admit records: `received` by `holder`, its first attempt."""
    return {
        "key": key,
        "kind": kind,
        "received_at": now,
        "state": "received",
        "payload": payload,
        "holder": holder,
        "attempts": 1,
    }


def admit_delivery(
    session: Session, *, key: str, kind: str, payload: dict[str, Any], holder: str, now: datetime
) -> bool:
    """Record a delivery before it is acked, as `received` by `holder`; True when it is new (race-free)."""
    table = Delivery.__table__  # type: ignore[attr-defined]
    values = delivery_row(key=key, kind=kind, payload=payload, holder=holder, now=now)
    return insert_once(session, table, values, keys=["key"]) is not None


def finish_delivery(session: Session, *, key: str, now: datetime) -> None:
    """The delivery's work is done (answered, or failed and reported): nobody carries it out again."""
    table = Delivery.__table__  # type: ignore[attr-defined]
    session.execute(
        sa.update(table)
        .where(table.c.key == key, table.c.state == "received")
        .values(state="done", finished_at=now, payload=None)
    )
    session.commit()


def unfinished_deliveries(session: Session, *, received_before: datetime, limit: int = 100) -> Sequence[Delivery]:
    """Deliveries acked before `received_before` whose work is not done, oldest first."""
    return session.exec(
        select(Delivery)
        .where(Delivery.state == "received", col(Delivery.received_at) < received_before)
        .order_by(col(Delivery.id))
        .limit(limit)
    ).all()


def claim_delivery(session: Session, *, key: str, from_holder: str | None, to_holder: str) -> bool:
    """Take over a delivery whose holder died, in one conditional UPDATE: exactly one claimant wins."""
    table = Delivery.__table__  # type: ignore[attr-defined]
    held_by = table.c.holder.is_(None) if from_holder is None else table.c.holder == from_holder
    claimed = session.execute(
        sa.update(table)
        .where(table.c.key == key, table.c.state == "received", held_by)
        .values(holder=to_holder, attempts=table.c.attempts + 1)
        .returning(table.c.id)
    ).scalar_one_or_none()
    session.commit()
    return claimed is not None


def forget_delivery(session: Session, *, key: str) -> None:
    """Delete a delivery that carried no work (no listener took it), so that it is no delivery of the bot's."""
    table = Delivery.__table__  # type: ignore[attr-defined]
    session.execute(sa.delete(table).where(table.c.key == key, table.c.state == "received"))
    session.commit()


def purge_deliveries(session: Session, *, received_before: datetime, limit: int = 5000) -> int:
    """Delete finished deliveries received before `received_before` (past Slack's retry window), at most `limit`
    at a time so one call never holds the table long; how many went. Unfinished ones are work: they stay."""
    table = Delivery.__table__  # type: ignore[attr-defined]
    ids = (
        sa.select(table.c.id)
        .where(table.c.state == "done", table.c.received_at < received_before)
        .order_by(table.c.id)
        .limit(limit)
        .scalar_subquery()
    )
    result = session.execute(sa.delete(table).where(table.c.id.in_(ids)))
    session.commit()
    return int(result.rowcount or 0)  # type: ignore[attr-defined]
