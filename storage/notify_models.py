"""How requesters hear about their runs: each person's default, and the direct messages told (once each)."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from storage.columns import _created, _ts


class UserPreference(SQLModel, table=True):
    """One person's defaults, set in App Home: how they hear that a run of theirs ended or needs them."""

    __tablename__ = "user_preferences"

    user_id: str = Field(primary_key=True, max_length=32, description="The Slack user id (U… or W…)")
    notify: str = Field(max_length=16, description="thread, dm or both")
    updated_at: datetime = _created()


class RequesterNotice(SQLModel, table=True):
    """A direct message telling a run's requester why they hear of it (it ended, it may be stuck): claimed before it
    is sent, so that the unique (run, reason) makes a second send a no-op; `sent_at` once Slack took it."""

    __tablename__ = "requester_notices"
    __table_args__ = (sa.UniqueConstraint("run_id", "reason", name="uq_requester_notices_run_id"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id")
    reason: str = Field(max_length=32, description="succeeded, failed, stopped, stuck")
    text: str = Field(max_length=4000, description="What the message says, fixed when it was claimed")
    channel: str | None = Field(default=None, max_length=32, description="The direct message channel, once sent")
    ts: str | None = Field(default=None, max_length=32)
    created_at: datetime = _created()
    sent_at: datetime | None = _ts(index=True)
