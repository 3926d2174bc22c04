"""Lease repository: one holder at a time for a named job (the watcher), with expiry so a dead holder's job moves on.

Every replica tries to take or renew the lease at the start of each tick; the row's conditional UPDATE
(or the INSERT of the first holder) is atomic in the database, so two replicas can never both hold it.
A holder that dies stops renewing, and after `ttl` the next replica to ask takes it over.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import sqlalchemy as sa
from sqlmodel import Session

from storage.models import Lease
from storage.repos import dialect_insert


def hold_lease(session: Session, *, name: str, holder: str, ttl: timedelta, now: datetime) -> bool:
    """Take or renew the lease `name` for `holder` until now+ttl; False while another live holder has it."""
    table = Lease.__table__  # type: ignore[attr-defined]
    expires = now + ttl
    renewed = session.execute(
        sa.update(table)
        .where(table.c.name == name, sa.or_(table.c.holder == holder, table.c.expires_at < now))
        .values(
            holder=holder,
            expires_at=expires,
            # A takeover restarts the clock of who holds it since when; a renewal keeps it.
            acquired_at=sa.case((table.c.holder == holder, table.c.acquired_at), else_=now),
        )
        .returning(table.c.name)
    ).scalar_one_or_none()
    if renewed is None:
        stmt = (
            dialect_insert(session, table)
            .values(name=name, holder=holder, expires_at=expires, acquired_at=now)
            .on_conflict_do_nothing(index_elements=["name"])
            .returning(table.c.name)
        )
        renewed = session.execute(stmt).scalar_one_or_none()
    session.commit()
    return renewed is not None


def release_lease(session: Session, *, name: str, holder: str) -> None:
    """Give the lease up at a clean shutdown (so another replica need not wait for it to expire)."""
    table = Lease.__table__  # type: ignore[attr-defined]
    session.execute(sa.delete(table).where(table.c.name == name, table.c.holder == holder))
    session.commit()


def lease_holder(session: Session, *, name: str, now: datetime) -> str | None:
    """The live holder of `name`, or None."""
    lease = session.get(Lease, name)
    if lease is None or lease.expires_at < now:
        return None
    return lease.holder


def live_holders(session: Session, *, prefix: str, now: datetime) -> set[str]:
    """Holders of the unexpired leases whose names start with `prefix` (e.g. every live process)."""
    table = Lease.__table__  # type: ignore[attr-defined]
    rows = session.execute(
        sa.select(table.c.holder).where(table.c.name.startswith(prefix), table.c.expires_at >= now)
    ).all()
    return {str(row[0]) for row in rows}
