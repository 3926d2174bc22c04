"""A service the bot depends on that does not answer (Polyaxon), while it does not: since when, told once.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-07 16:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "service_outages",
        sa.Column("service", sa.String(length=32), nullable=False),
        sa.Column("host", sa.String(length=512), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.String(length=2000), nullable=False),
        sa.Column("told_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("service", name=op.f("pk_service_outages")),
    )


def downgrade() -> None:
    op.drop_table("service_outages")
