"""SQLModel tables. Every timestamp is timezone-aware UTC; schema changes go through Alembic."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlmodel import Field, SQLModel

# The background passes' failing items (bot.background), likewise in their own module.
from storage.background_models import BackgroundItemFailure as BackgroundItemFailure
from storage.columns import UTCDateTime as UTCDateTime
from storage.columns import _created, _json, _ts
from storage.columns import utcnow as utcnow

# Streamed logs' one-follow-per-run guard, likewise in its own module.
from storage.follow_models import LogFollow as LogFollow

# Each person's notification default and the direct messages told to requesters (bot.notify).
from storage.notify_models import RequesterNotice as RequesterNotice
from storage.notify_models import UserPreference as UserPreference
from storage.outage_models import ServiceOutage as ServiceOutage

# The release path's tables live in their own module; importing them here registers them with the metadata
# and keeps `from storage.models import …` the one place tables are imported from.
from storage.release_models import ReleaseEvent as ReleaseEvent
from storage.release_models import ServingCheck as ServingCheck
from storage.release_models import StageChange as StageChange
from storage.step_models import StepExecution as StepExecution


class Run(SQLModel, table=True):
    """One submission: the bot's record of a Polyaxon run."""

    __tablename__ = "runs"
    # One row per attempt of a retried run: a second replica (or a restarted bot) cannot start the same attempt
    # twice, so the recipe's retry budget holds whatever crashes.
    __table_args__ = (
        sa.UniqueConstraint("first_attempt_id", "attempt", name="uq_runs_first_attempt_attempt"),
        # The watcher's retry check (failed runs of the last day) and the digest's finished runs by period.
        sa.Index("ix_runs_status_finished_at", "status", "finished_at"),
    )

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(max_length=128, unique=True, description="Polyaxon run name = idempotency key")
    polyaxon_uuid: str | None = Field(default=None, max_length=64, unique=True)
    recipe_name: str = Field(max_length=128, index=True)
    recipe_hash: str = Field(max_length=80)
    # The catalog's revision it was planned from: a git commit (`-dirty`), or a content digest; None before 0020.
    catalog_revision: str | None = Field(default=None, max_length=80)
    component: str = Field(default="", max_length=128)
    params: dict[str, Any] = _json(dict)
    overrides: dict[str, Any] = _json(dict)
    presets: list[str] = _json(list)
    pins: dict[str, Any] = _json(dict)
    comparable: bool = Field(default=True)
    eval_contract: dict[str, Any] = _json(dict)
    eval_contract_hash: str = Field(default="", max_length=80, index=True)
    requester: str = Field(max_length=32, index=True)
    channel: str = Field(max_length=32, index=True)
    card_ts: str | None = Field(default=None, max_length=32)
    thread_ts: str | None = Field(default=None, max_length=32)
    status: str = Field(default="planned", max_length=32, index=True)
    parent_run_id: int | None = Field(default=None, foreign_key="runs.id")
    last_metrics: dict[str, Any] = _json(dict)
    pending_operation: dict[str, Any] | None = Field(
        default=None, sa_column=sa.Column(sa.JSON(), nullable=True), description="Operation waiting for Polyaxon"
    )
    last_step: int | None = Field(default=None)
    # The latest complete checkpoint the trainer reported (None: nothing to resume from).
    checkpoint_step: int | None = Field(default=None)
    # "train", or "preflight" for the short validation run of a distributed recipe (its own card and thread).
    kind: str = Field(default="train", max_length=16, sa_column_kwargs={"server_default": "train"})
    # `/finetune outputs` read the run's outputs back and they checked out: the run is confirmed.
    outputs_confirmed_at: datetime | None = _ts()
    outputs_check: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=True))
    # How a distributed run passed the smoke-first gate: the preflight that validated it, or who skipped it.
    validation: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=True))
    # A trial of a sweep: the sweep's own run (kind "sweep", whose Polyaxon run is the matrix). Trials have no card;
    # they live on the sweep's card and leaderboard, and post in the sweep's thread.
    sweep_id: int | None = Field(default=None, foreign_key="runs.id", index=True)
    last_activity_at: datetime | None = _ts()
    stuck_flagged_at: datetime | None = _ts()
    # What the recipe and presets said about failures when it was submitted: `retry` ({max, on}), `max_pending_s`
    # (the start deadline) and `notify` (a channel for final failures). Kept with the run: a recipe edited later
    # does not change the rules of a run already going.
    policy: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=True))
    # Training health (bot.health): the state its rules keep between observations (smoothed loss, best eval,
    # streaks, the step rate since the last start) and which alerts fired, at which step.
    health: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=True))
    # Attempt N of a retried run; the first attempt's id (None on the first), whose card every attempt edits.
    attempt: int = Field(default=1, sa_column_kwargs={"server_default": "1"})
    first_attempt_id: int | None = Field(default=None, foreign_key="runs.id")
    # Why it failed (bot.failures): class, evidence, hint, and the retry decision ("due", "started", "no").
    failure: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=True))
    # The last Polyaxon status condition told while it waited ("reason: message"): the same one is not told twice.
    condition: str | None = Field(default=None, max_length=512)
    # What it holds while running and what an hour costs, as its presets said when it was submitted
    # (bot.catalog.cost.CostProfile): accounting multiplies its time in running by this.
    cost: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=True))
    # Digests and `status` ask for runs created in a period.
    created_at: datetime = _created(index=True)
    updated_at: datetime = _created()
    started_at: datetime | None = _ts()
    finished_at: datetime | None = _ts(index=True)


class Sweep(SQLModel, table=True):
    """What a sweep searches and how its trials are ranked; its run (kind "sweep") carries status, card and thread."""

    __tablename__ = "sweeps"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", unique=True)
    mode: str = Field(max_length=16, description="grid or random")
    space: list[dict[str, Any]] = _json(list)
    trials: int = Field(description="Trials planned: the grid's size (or its cap), or the random sample's")
    concurrency: int
    seed: int | None = Field(default=None, description="The random search's seed")
    metric: str = Field(max_length=128, description="The eval contract's ranking metric")
    higher_is_better: bool = Field(default=True)
    target: float | None = Field(default=None, description="Reaching it on the metric ends the sweep")
    failure_cutoff: int = Field(default=3, description="Consecutive failed trials that stop the sweep")
    leaderboard_ts: str | None = Field(default=None, max_length=32)
    leaderboard_digest: str | None = Field(default=None, max_length=80, description="What the leaderboard shows")
    stop_reason: str | None = Field(default=None, description="Why the bot stopped it: cutoff, target, a user")
    summary_ts: str | None = Field(default=None, max_length=32, description="The final summary's post")
    # What the leaderboard last showed, for digests: trial counts and the best trial (name, metric, values).
    progress: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=True))
    created_at: datetime = _created()


class Preflight(SQLModel, table=True):
    """The validation of a distributed recipe with its pins and presets: the run that checked it and its report."""

    __tablename__ = "preflights"

    id: int | None = Field(default=None, primary_key=True)
    gate_key: str = Field(max_length=80, index=True, description="sha256 of recipe, pins, presets, memory params")
    recipe_name: str = Field(max_length=128)
    presets: list[str] = _json(list)
    pins: dict[str, Any] = _json(dict)
    run_id: int | None = Field(default=None, foreign_key="runs.id", unique=True)
    status: str = Field(default="running", max_length=16, index=True, description="running, passed, failed")
    report: dict[str, Any] | None = Field(default=None, sa_column=sa.Column(sa.JSON(), nullable=True))
    requester: str = Field(max_length=32)
    channel: str = Field(max_length=32)
    created_at: datetime = _created()
    finished_at: datetime | None = _ts()


class StatusEvent(SQLModel, table=True):
    """One observed status transition of a run."""

    __tablename__ = "status_events"

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    status: str = Field(max_length=32)
    previous_status: str | None = Field(default=None, max_length=32)
    message: str | None = Field(default=None)
    observed_at: datetime = _created()
    posted_ts: str | None = Field(default=None, max_length=32, description="Thread post about it")


class PostedMessage(SQLModel, table=True):
    """A message the bot posted: its ts maps back to a run and a purpose (never parse our own text)."""

    __tablename__ = "posted_messages"
    __table_args__ = (sa.UniqueConstraint("channel", "ts", name="uq_posted_messages_channel_ts"),)

    id: int | None = Field(default=None, primary_key=True)
    channel: str = Field(max_length=32)
    ts: str = Field(max_length=32)
    thread_ts: str | None = Field(default=None, max_length=32)
    run_id: int | None = Field(default=None, foreign_key="runs.id", index=True)
    purpose: str = Field(max_length=32, description="card, transition, logs, approval_request, digest, …")
    created_at: datetime = _created()


class Delivery(SQLModel, table=True):
    """A Slack delivery, recorded before it is acked: the unique key makes a retry a no-op, and a delivery
    whose work a dead process never finished (`received`) is carried out by another, once."""

    __tablename__ = "deliveries"

    id: int | None = Field(default=None, primary_key=True)
    key: str = Field(max_length=128, unique=True)
    kind: str = Field(max_length=32, description="event, command, action")
    # The retention job deletes finished deliveries past Slack's retry window by this.
    received_at: datetime = _created(index=True)
    state: str = Field(
        default="received",
        max_length=16,
        index=True,
        sa_column_kwargs={"server_default": "done"},
        description="received (work not finished) or done",
    )
    payload: dict[str, Any] | None = Field(
        default=None, sa_column=sa.Column(sa.JSON(), nullable=True), description="The delivery, secrets stripped"
    )
    holder: str | None = Field(default=None, max_length=128, description="The process carrying it out")
    attempts: int = Field(default=0, sa_column_kwargs={"server_default": "0"})
    finished_at: datetime | None = _ts()


class ApprovalRequest(SQLModel, table=True):
    """An approval request: register one candidate (run + checkpoint digest) as a model version, or let a held
    distributed run skip its preflight (`action`). One set of rules for both: approvers, quorum, expiry, audit."""

    __tablename__ = "approval_requests"
    __table_args__ = (sa.UniqueConstraint("channel", "message_ts", name="uq_approval_requests_message"),)

    id: int | None = Field(default=None, primary_key=True)
    run_id: int = Field(foreign_key="runs.id", index=True)
    # "register" (a model version) or "skip_preflight" (submit a held distributed run without a preflight).
    action: str = Field(default="register", max_length=32, sa_column_kwargs={"server_default": "register"})
    model: str = Field(max_length=128)
    version: str | None = Field(default=None, max_length=64)
    requester: str = Field(max_length=32)
    channel: str = Field(max_length=32)
    message_ts: str | None = Field(default=None, max_length=32)
    thread_ts: str | None = Field(default=None, max_length=32)
    checkpoint_path: str | None = Field(default=None)
    candidate_digest: str = Field(max_length=80, description="Digest of checkpoint + eval results")
    criteria: list[dict[str, Any]] = _json(list)
    criteria_version: str | None = Field(default=None, max_length=80)
    status: str = Field(
        default="open",
        max_length=32,
        index=True,
        description="open, approved (quorum reached, action pending), registering, registered, voided, expired; a "
        "preflight skip: granted; a promotion: promoting, promoted",
    )
    created_at: datetime = _created()
    expires_at: datetime | None = _ts()
    decided_at: datetime | None = _ts()
    candidate: dict[str, Any] | None = Field(
        default=None, sa_column=sa.Column(sa.JSON(), nullable=True), description="The candidate as requested"
    )
    quorum: int = Field(default=1, description="Distinct approvals needed, as configured when requested")
    claimed_at: datetime | None = _ts()
    error: str | None = Field(default=None, description="Why the last registration attempt failed")
    recorded_at: datetime | None = _ts()
    stage: str | None = Field(default=None, max_length=16, description="A promotion's target stage")


class Approval(SQLModel, table=True):
    """One approver's reaction on a request message; revoked when the reaction is removed."""

    __tablename__ = "approvals"
    __table_args__ = (sa.UniqueConstraint("request_id", "user", name="uq_approvals_request_user"),)

    id: int | None = Field(default=None, primary_key=True)
    request_id: int = Field(foreign_key="approval_requests.id", index=True)
    user: str = Field(max_length=32)
    reaction: str = Field(max_length=64)
    message_ts: str = Field(max_length=32)
    approved_at: datetime = _created()
    revoked_at: datetime | None = _ts()


class ApprovalNotice(SQLModel, table=True):
    """A reason told in a request's thread: the unique key makes each reason told once per user."""

    __tablename__ = "approval_notices"
    __table_args__ = (sa.UniqueConstraint("request_id", "user", "code", name="uq_approval_notices_request_user_code"),)

    id: int | None = Field(default=None, primary_key=True)
    request_id: int = Field(foreign_key="approval_requests.id", index=True)
    user: str = Field(max_length=32)
    code: str = Field(max_length=32)
    created_at: datetime = _created()


class Registration(SQLModel, table=True):
    """A model version registered from a run after approval."""

    __tablename__ = "registrations"
    __table_args__ = (sa.UniqueConstraint("model", "version", name="uq_registrations_model_version"),)

    id: int | None = Field(default=None, primary_key=True)
    request_id: int | None = Field(default=None, foreign_key="approval_requests.id", unique=True)
    model: str = Field(max_length=128)
    version: str = Field(max_length=64)
    run_id: int = Field(foreign_key="runs.id", index=True)
    artifacts: list[str] = _json(list)
    polyaxon_version: str | None = Field(default=None, max_length=128)
    registered_at: datetime = _created(index=True)  # the digest's registrations of the period


class DigestSchedule(SQLModel, table=True):
    """When a channel gets its digest."""

    __tablename__ = "digest_schedules"

    id: int | None = Field(default=None, primary_key=True)
    channel: str = Field(max_length=32, unique=True)
    cron: str = Field(max_length=64, description="crontab: minute hour day month day-of-week")
    timezone: str = Field(default="UTC", max_length=64)
    created_by: str = Field(max_length=32)
    created_at: datetime = _created()
    last_posted_at: datetime | None = _ts()


class AuditEntry(SQLModel, table=True):
    """Who did what, when, and how it ended."""

    __tablename__ = "audit_entries"

    id: int | None = Field(default=None, primary_key=True)
    at: datetime = _created()
    user: str = Field(max_length=32, index=True)
    channel: str | None = Field(default=None, max_length=32)
    command: str = Field(description="The command text or event, secrets never included")
    outcome: str = Field(max_length=32, description="ok, refused, error, ignored")
    detail: str | None = Field(default=None)
    run_id: int | None = Field(default=None, foreign_key="runs.id", index=True)


class DigestPost(SQLModel, table=True):
    """One digest slot of a channel, claimed before posting so that only one replica posts it."""

    __tablename__ = "digest_posts"
    __table_args__ = (sa.UniqueConstraint("channel", "slot_at", name="uq_digest_posts_channel_slot"),)

    id: int | None = Field(default=None, primary_key=True)
    channel: str = Field(max_length=32)
    slot_at: datetime = Field(sa_column=sa.Column(UTCDateTime(), nullable=False))
    kind: str = Field(max_length=16, description="scheduled or now")
    claimed_at: datetime = _created()
    posted_at: datetime | None = _ts()
    message_ts: str | None = Field(default=None, max_length=32)
    late: bool = Field(default=False)


class ChannelBudget(SQLModel, table=True):
    """A channel's accelerator-hour budget per week or month (approvers set it)."""

    __tablename__ = "channel_budgets"

    id: int | None = Field(default=None, primary_key=True)
    channel: str = Field(max_length=32, unique=True)
    hours: float
    period: str = Field(max_length=8, description="week or month")
    set_by: str = Field(max_length=32)
    set_at: datetime = _created()


class BudgetNotice(SQLModel, table=True):
    """A budget level (80 %) told to a channel: the unique key makes it once per period."""

    __tablename__ = "budget_notices"
    __table_args__ = (
        sa.UniqueConstraint("channel", "period_start", "level", name="uq_budget_notices_channel_period_level"),
    )

    id: int | None = Field(default=None, primary_key=True)
    channel: str = Field(max_length=32)
    period_start: datetime = Field(sa_column=sa.Column(UTCDateTime(), nullable=False))
    level: int
    created_at: datetime = _created()


class Lease(SQLModel, table=True):
    """Who runs a named scheduled job (the watcher) until when: one holder at a time, expiring."""

    __tablename__ = "leases"

    name: str = Field(primary_key=True, max_length=64)
    holder: str = Field(max_length=128)
    expires_at: datetime = Field(sa_column=sa.Column(UTCDateTime(), nullable=False))
    acquired_at: datetime = Field(sa_column=sa.Column(UTCDateTime(), nullable=False))


# APScheduler's SQLAlchemy job store table, declared here so that Alembic owns the schema; the job store's
# own create_all then finds it and does nothing. Columns match apscheduler.jobstores.sqlalchemy (3.x).
apscheduler_jobs = sa.Table(
    "apscheduler_jobs",
    SQLModel.metadata,
    sa.Column("id", sa.Unicode(191), primary_key=True),
    sa.Column("next_run_time", sa.Float(25), index=True),
    sa.Column("job_state", sa.LargeBinary, nullable=False),
)
