"""The background passes' failing items: one row per item that failed, until it succeeds or is parked."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from storage.columns import UTCDateTime, _created, _ts


class BackgroundItemFailure(SQLModel, table=True):
    """An item of a background pass (a run of the tick, a pending card, a webhook event, a digest …) that failed.

    Kept across restarts so that backoff and parking survive them; deleted when the item goes through again.
    """

    __tablename__ = "background_item_failures"
    __table_args__ = (sa.UniqueConstraint("kind", "key", name="uq_background_item_failures_kind_key"),)

    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(max_length=32, description="The pass: watch_run, pending_submit, webhook_event, digest, …")
    key: str = Field(max_length=128, description="The item within its pass: a run id, an event id, a channel")
    run_id: int | None = Field(default=None, index=True, description="The run the item is about, when there is one")
    attempts: int = 0
    last_error: str = Field(default="", max_length=2000)
    first_failed_at: datetime = _created()
    last_failed_at: datetime = Field(sa_column=sa.Column(UTCDateTime(), nullable=False))
    next_at: datetime = Field(sa_column=sa.Column(UTCDateTime(), nullable=False))
    parked_at: datetime | None = _ts(index=True)
    told_at: datetime | None = _ts()
