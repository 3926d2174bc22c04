"""Approval requests keep their candidate, quorum, claim and registration error; notices are told once.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-02 18:50:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approval_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("candidate", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("quorum", sa.Integer(), nullable=False, server_default=sa.text("1")))
        batch_op.add_column(sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("error", sa.String(), nullable=True))
        batch_op.add_column(sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=True))

    op.create_table(
        "approval_notices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=32), nullable=False),
        sa.Column("code", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["request_id"],
            ["approval_requests.id"],
            name=op.f("fk_approval_notices_request_id_approval_requests"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approval_notices")),
        sa.UniqueConstraint("request_id", "user", "code", name="uq_approval_notices_request_user_code"),
    )
    with op.batch_alter_table("approval_notices", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_approval_notices_request_id"), ["request_id"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("approval_notices", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approval_notices_request_id"))
    op.drop_table("approval_notices")

    with op.batch_alter_table("approval_requests", schema=None) as batch_op:
        batch_op.drop_column("recorded_at")
        batch_op.drop_column("error")
        batch_op.drop_column("claimed_at")
        batch_op.drop_column("quorum")
        batch_op.drop_column("candidate")
