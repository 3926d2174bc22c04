"""The catalog's revision each run was planned from (the catalog reloads itself while the bot runs).

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-07 18:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("catalog_revision", sa.String(length=80), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("catalog_revision")
