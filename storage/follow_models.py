"""Streamed logs (`/finetune logs RUN follow`): one row per run, the guard that one follow streams at a time."""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from storage.columns import UTCDateTime, _created, _ts


class LogFollow(SQLModel, table=True):
    """A run's log follow: who streams it until when (a lease every replica sees), where, and how far it got.

    One row per run, reused by each new follow once the last one stopped: the unique run id makes two
    replicas' first follows one row, and the conditional claim (`storage.repos.follows`) makes them one stream.
    """

    __tablename__ = "log_follows"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", unique=True)
    requester: str = Field(max_length=32, description="Who asked: the stream's recipient_user_id")
    channel: str = Field(max_length=32)
    thread_ts: str = Field(max_length=32, description="The run's card: the stream is a reply in its thread")
    state: str = Field(max_length=16, description="streaming, or stopped")
    holder: str = Field(max_length=128, description="The process streaming it (bot.lease.holder_id)")
    lease_until: datetime = Field(sa_column=sa.Column(UTCDateTime(), nullable=False, index=True))
    stream_ts: str | None = Field(default=None, max_length=32, description="The message streaming now")
    segment_started_at: datetime | None = _ts()
    # Log lines appended so far (the log only grows): the next poll appends the lines after these.
    lines_sent: int | None = None
    started_at: datetime = _created()
    deadline: datetime = Field(sa_column=sa.Column(UTCDateTime(), nullable=False))
    reason: str | None = Field(default=None, max_length=300, description="Why it stopped")
    stopped_at: datetime | None = _ts()
