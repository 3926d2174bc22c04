"""Accelerator-hours: each run's cost profile, channel budgets, and the 80 % notices told once per period.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-05 10:20:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("cost", sa.JSON(), nullable=True))
    op.create_table(
        "channel_budgets",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("hours", sa.Float(), nullable=False),
        sa.Column("period", sa.String(length=8), nullable=False),
        sa.Column("set_by", sa.String(length=32), nullable=False),
        sa.Column("set_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_channel_budgets")),
        sa.UniqueConstraint("channel", name=op.f("uq_channel_budgets_channel")),
    )
    op.create_table(
        "budget_notices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("period_start", sa.DateTime(timezone=True), nullable=False),
        sa.Column("level", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_budget_notices")),
        sa.UniqueConstraint("channel", "period_start", "level", name="uq_budget_notices_channel_period_level"),
    )


def downgrade() -> None:
    op.drop_table("budget_notices")
    op.drop_table("channel_budgets")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("cost")
