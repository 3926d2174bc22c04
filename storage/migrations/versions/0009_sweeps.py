"""Sweeps: a run can be a sweep (its Polyaxon run is the matrix) or one of a sweep's trials.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-03 19:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("sweep_id", sa.Integer(), nullable=True))
        batch_op.create_index(batch_op.f("ix_runs_sweep_id"), ["sweep_id"], unique=False)
        batch_op.create_foreign_key(batch_op.f("fk_runs_sweep_id_runs"), "runs", ["sweep_id"], ["id"])

    op.create_table(
        "sweeps",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("space", sa.JSON(), nullable=False),
        sa.Column("trials", sa.Integer(), nullable=False),
        sa.Column("concurrency", sa.Integer(), nullable=False),
        sa.Column("seed", sa.Integer(), nullable=True),
        sa.Column("metric", sa.String(length=128), nullable=False),
        sa.Column("higher_is_better", sa.Boolean(), nullable=False),
        sa.Column("target", sa.Float(), nullable=True),
        sa.Column("failure_cutoff", sa.Integer(), nullable=False),
        sa.Column("leaderboard_ts", sa.String(length=32), nullable=True),
        sa.Column("leaderboard_digest", sa.String(length=80), nullable=True),
        sa.Column("stop_reason", sa.String(), nullable=True),
        sa.Column("summary_ts", sa.String(length=32), nullable=True),
        sa.Column("progress", sa.JSON(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_sweeps_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_sweeps")),
        sa.UniqueConstraint("run_id", name=op.f("uq_sweeps_run_id")),
    )


def downgrade() -> None:

    op.drop_table("sweeps")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_constraint(batch_op.f("fk_runs_sweep_id_runs"), type_="foreignkey")
        batch_op.drop_index(batch_op.f("ix_runs_sweep_id"))
        batch_op.drop_column("sweep_id")
