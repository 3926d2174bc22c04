"""The background passes' failing items: recorded with their error, retried with backoff, then parked.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-12 09:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "background_item_failures",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("last_error", sa.String(length=2000), nullable=False),
        sa.Column("first_failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_failed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("next_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("parked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("told_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_background_item_failures")),
        sa.UniqueConstraint("kind", "key", name="uq_background_item_failures_kind_key"),
    )
    op.create_index(op.f("ix_background_item_failures_run_id"), "background_item_failures", ["run_id"], unique=False)
    op.create_index(
        op.f("ix_background_item_failures_parked_at"), "background_item_failures", ["parked_at"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_background_item_failures_parked_at"), table_name="background_item_failures")
    op.drop_index(op.f("ix_background_item_failures_run_id"), table_name="background_item_failures")
    op.drop_table("background_item_failures")
