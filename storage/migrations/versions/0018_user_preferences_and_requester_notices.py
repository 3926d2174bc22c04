"""Each person's notification default (App Home), and the direct messages told to requesters, once each.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-06 11:40:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "user_preferences",
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("notify", sa.String(length=16), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("user_id", name=op.f("pk_user_preferences")),
    )
    op.create_table(
        "requester_notices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("text", sa.String(length=4000), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=True),
        sa.Column("ts", sa.String(length=32), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_requester_notices_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_requester_notices")),
        sa.UniqueConstraint("run_id", "reason", name="uq_requester_notices_run_id"),
    )
    op.create_index(op.f("ix_requester_notices_sent_at"), "requester_notices", ["sent_at"], unique=False)


def downgrade() -> None:
    op.drop_index(op.f("ix_requester_notices_sent_at"), table_name="requester_notices")
    op.drop_table("requester_notices")
    op.drop_table("user_preferences")
