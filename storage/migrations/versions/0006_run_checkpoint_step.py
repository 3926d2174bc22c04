"""Runs remember the step of their latest complete checkpoint, as the trainer reported it.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-03 14:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("checkpoint_step", sa.Integer(), nullable=True))


def downgrade() -> None:

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("checkpoint_step")
