"""Runs can be confirmed (outputs read back and checked), validated by a preflight, or be one; an approval
request says what it approves (registration, or skipping a preflight).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-03 16:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:

    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("kind", sa.String(length=16), nullable=False, server_default="train"))
        batch_op.add_column(sa.Column("outputs_confirmed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column("outputs_check", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("validation", sa.JSON(), nullable=True))

    with op.batch_alter_table("approval_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("action", sa.String(length=32), nullable=False, server_default="register"))

    op.create_table(
        "preflights",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("gate_key", sa.String(length=80), nullable=False),
        sa.Column("recipe_name", sa.String(length=128), nullable=False),
        sa.Column("presets", sa.JSON(), nullable=False),
        sa.Column("pins", sa.JSON(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("requester", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_preflights_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_preflights")),
        sa.UniqueConstraint("run_id", name=op.f("uq_preflights_run_id")),
    )
    with op.batch_alter_table("preflights", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_preflights_gate_key"), ["gate_key"], unique=False)
        batch_op.create_index(batch_op.f("ix_preflights_status"), ["status"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("preflights", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_preflights_status"))
        batch_op.drop_index(batch_op.f("ix_preflights_gate_key"))
    op.drop_table("preflights")
    with op.batch_alter_table("approval_requests", schema=None) as batch_op:
        batch_op.drop_column("action")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_column("validation")
        batch_op.drop_column("outputs_check")
        batch_op.drop_column("outputs_confirmed_at")
        batch_op.drop_column("kind")
