"""A service the bot depends on that stopped answering (Polyaxon): since when, and whether the cards said so."""

from __future__ import annotations

from datetime import datetime

from sqlmodel import Field, SQLModel

from storage.columns import _created, _ts


class ServiceOutage(SQLModel, table=True):
    """One row per service while it does not answer; deleted when it answers again. In the database, so that every
    replica's cards say the same and a restarted bot still knows since when."""

    __tablename__ = "service_outages"

    service: str = Field(primary_key=True, max_length=32, description="polyaxon")
    host: str = Field(max_length=512)
    since: datetime = _created()
    last_seen_at: datetime = _created()
    last_error: str = Field(default="", max_length=2000)
    # When the active runs' cards were edited to say so (once per outage); None while it is too young to tell.
    told_at: datetime | None = _ts()
