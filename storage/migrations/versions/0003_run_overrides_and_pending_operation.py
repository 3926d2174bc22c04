"""Runs keep their command-line overrides (to re-plan a resume) and an operation waiting for Polyaxon.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02 10:26:03.686946
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("overrides", sa.JSON(), nullable=False, server_default=sa.text("'{}'")))
        batch_op.add_column(sa.Column("pending_operation", sa.JSON(), nullable=True))


def downgrade() -> None:

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("pending_operation")
        batch_op.drop_column("overrides")
