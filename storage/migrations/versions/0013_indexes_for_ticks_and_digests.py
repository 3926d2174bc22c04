"""Runs by status and finish time (the watcher's retry check), registrations by time (the digest's period).

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-04 20:45:00.000000
"""

from __future__ import annotations

from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index("ix_runs_status_finished_at", ["status", "finished_at"], unique=False)
    with op.batch_alter_table("registrations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_registrations_registered_at"), ["registered_at"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("registrations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_registrations_registered_at"))
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index("ix_runs_status_finished_at")
