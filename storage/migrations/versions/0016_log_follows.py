"""Streamed logs: one row per run, the lease that lets one follow stream at a time across replicas.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06 11:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "log_follows",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("requester", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("thread_ts", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("lease_until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("stream_ts", sa.String(length=32), nullable=True),
        sa.Column("segment_started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("lines_sent", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("reason", sa.String(length=300), nullable=True),
        sa.Column("stopped_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_log_follows_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_log_follows")),
        sa.UniqueConstraint("run_id", name=op.f("uq_log_follows_run_id")),
    )
    op.create_index(op.f("ix_log_follows_lease_until"), "log_follows", ["lease_until"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_log_follows_lease_until"), table_name="log_follows")
    op.drop_table("log_follows")
