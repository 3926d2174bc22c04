"""Workflow Builder steps: one row per `function_executed` the bot took, until Slack was told how it ended."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

from storage.columns import _created, _json, _ts


class StepExecution(SQLModel, table=True):
    """A custom step's execution: what it was asked, what it waits on, and the one completion Slack gets.

    `status`: `pending` (working, or waiting on a promotion's approval), `completing` (its outcome chosen and
    claimed, Slack not yet told: a process that died here is finished by the next pass), `completed`.
    """

    __tablename__ = "step_executions"

    id: int | None = Field(default=None, primary_key=True)
    # Slack's id of this execution: one row, so a second delivery of it (a retry, a redelivery) starts nothing.
    function_execution_id: str = Field(max_length=64, unique=True)
    callback_id: str = Field(max_length=64)
    workflow_execution_id: str | None = Field(default=None, max_length=64)
    requester: str = Field(max_length=32)
    channel: str | None = Field(default=None, max_length=32)
    inputs: dict[str, Any] = _json(dict)
    status: str = Field(default="pending", max_length=16, index=True)
    # What it waits on: the run it started, or the promotion (model, version, stage) it asked for.
    run_id: int | None = Field(default=None, foreign_key="runs.id")
    model: str | None = Field(default=None, max_length=128)
    version: str | None = Field(default=None, max_length=64)
    stage: str | None = Field(default=None, max_length=16)
    # The chosen completion: outputs (completeSuccess) or an error (completeError), stored before Slack is told.
    outputs: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=True))
    error: str | None = Field(default=None, max_length=2000)
    created_at: datetime = _created()
    claimed_at: datetime | None = _ts()
    completed_at: datetime | None = _ts()
