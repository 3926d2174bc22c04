"""The release path's tables: serving checks, stage changes and the release webhook's outbox."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from storage.columns import _created, _json, _ts


class ServingCheck(SQLModel, table=True):
    """A registered version loaded the way its server would load it: the check's run, its report and verdict."""

    __tablename__ = "serving_checks"

    id: int | None = Field(default=None, primary_key=True)
    registration_id: int = Field(foreign_key="registrations.id", index=True)
    model: str = Field(max_length=128)
    version: str = Field(max_length=64)
    spec_digest: str = Field(max_length=80, description="sha256 of the serving spec: engine, prompt set, budgets")
    prompt_set_digest: str = Field(max_length=80)
    run_id: int | None = Field(default=None, foreign_key="runs.id", unique=True)
    stage: str = Field(max_length=16, description="The stage the promotion that started it asked for")
    status: str = Field(default="running", max_length=16, index=True, description="running, passed, failed")
    report: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=True))
    verdict: list[dict[str, Any]] = _json(list)
    requester: str = Field(max_length=32)
    channel: str = Field(max_length=32)
    created_at: datetime = _created()
    finished_at: datetime | None = _ts()


class StageChange(SQLModel, table=True):
    """One move of a model version between stages, as the bot made it in Polyaxon (the release audit trail)."""

    __tablename__ = "stage_changes"

    id: int | None = Field(default=None, primary_key=True)
    model: str = Field(max_length=128, index=True)
    version: str = Field(max_length=64)
    registration_id: int = Field(foreign_key="registrations.id", index=True)
    from_stage: str = Field(max_length=16)
    to_stage: str = Field(max_length=16)
    kind: str = Field(max_length=16, description="promote, superseded, rollback, rolled_back")
    request_id: int | None = Field(default=None, foreign_key="approval_requests.id", index=True)
    serving_check_id: int | None = Field(default=None, foreign_key="serving_checks.id")
    approvers: list[str] = _json(list)
    actor: str = Field(max_length=32, description="Who asked: the requester, or who rolled back")
    reason: str = Field(description="What Polyaxon's stage condition records")
    at: datetime = _created()


class ReleaseEvent(SQLModel, table=True):
    """The outbox of the signed release webhook: one row per stage change, delivered once, retried with backoff."""

    __tablename__ = "release_events"

    id: int | None = Field(default=None, primary_key=True)
    event_id: str = Field(max_length=64, unique=True, description="The idempotency key the receiver sees")
    stage_change_id: int = Field(foreign_key="stage_changes.id", index=True)
    payload: dict[str, Any] = _json(dict)
    status: str = Field(default="pending", max_length=16, index=True, description="pending, delivered, failed")
    attempts: int = Field(default=0)
    next_attempt_at: datetime = _created()
    last_error: str | None = Field(default=None)
    created_at: datetime = _created()
    delivered_at: datetime | None = _ts()
