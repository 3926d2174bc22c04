"""Outages of the services the bot depends on: recorded when a call meets one, told once, ended when it answers."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Session, col, update

from storage.models import ServiceOutage
from storage.repos.common import delete_rows, dialect_insert


def record_outage(session: Session, *, service: str, host: str, error: str, now: datetime) -> ServiceOutage:
    """The service did not answer at `now`: its outage row, begun now unless one is open (race-free)."""
    table = ServiceOutage.__table__  # type: ignore[attr-defined]
    values = {"service": service, "host": host, "since": now, "last_seen_at": now, "last_error": error[:2000]}
    stmt = dialect_insert(session, table).values(**values)
    session.execute(
        stmt.on_conflict_do_update(
            index_elements=["service"], set_={"last_seen_at": now, "last_error": error[:2000], "host": host}
        )
    )
    session.flush()
    row = session.get(ServiceOutage, service, populate_existing=True)
    assert row is not None
    return row


def current_outage(session: Session, *, service: str) -> ServiceOutage | None:
    """The service's open outage, if it has one."""
    return session.get(ServiceOutage, service)


def claim_outage_told(session: Session, *, service: str, now: datetime) -> bool:
    """Claim telling the open outage on the cards; True only for the one caller that claims it."""
    result = session.execute(
        update(ServiceOutage)
        .where(col(ServiceOutage.service) == service, col(ServiceOutage.told_at).is_(None))
        .values(told_at=now)
    )
    return bool(getattr(result, "rowcount", 0))


def end_outage(session: Session, *, service: str) -> bool:
    """The service answers again: its outage row goes; whether there was one."""
    table = ServiceOutage.__table__  # type: ignore[attr-defined]
    return delete_rows(session, table, table.c.service == service)
