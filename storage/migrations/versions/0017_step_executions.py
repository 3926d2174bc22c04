"""Workflow Builder steps: each function execution the bot took, what it waits on, and its one completion.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06 11:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "step_executions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("function_execution_id", sa.String(length=64), nullable=False),
        sa.Column("callback_id", sa.String(length=64), nullable=False),
        sa.Column("workflow_execution_id", sa.String(length=64), nullable=True),
        sa.Column("requester", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=True),
        sa.Column("inputs", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("model", sa.String(length=128), nullable=True),
        sa.Column("version", sa.String(length=64), nullable=True),
        sa.Column("stage", sa.String(length=16), nullable=True),
        sa.Column("outputs", sa.JSON(), nullable=True),
        sa.Column("error", sa.String(length=2000), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("completed_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_step_executions_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_step_executions")),
        sa.UniqueConstraint("function_execution_id", name=op.f("uq_step_executions_function_execution_id")),
    )
    op.create_index(op.f("ix_step_executions_status"), "step_executions", ["status"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_step_executions_status"), table_name="step_executions")
    op.drop_table("step_executions")
