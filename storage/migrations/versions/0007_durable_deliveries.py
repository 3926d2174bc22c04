"""Deliveries are durable: each acked delivery keeps its payload and state until its work is done.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03 15:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:

    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        # Deliveries recorded before this revision were carried out when they arrived.
        batch_op.add_column(sa.Column("state", sa.String(length=16), nullable=False, server_default="done"))
        batch_op.add_column(sa.Column("payload", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("holder", sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index(batch_op.f("ix_deliveries_state"), ["state"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("deliveries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_deliveries_state"))
        batch_op.drop_column("finished_at")
        batch_op.drop_column("attempts")
        batch_op.drop_column("holder")
        batch_op.drop_column("payload")
        batch_op.drop_column("state")
