"""Digest slots claimed per channel (one post across replicas) and APScheduler's job store table.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-02 10:16:22.907390
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "apscheduler_jobs",
        sa.Column("id", sa.Unicode(length=191), nullable=False),
        sa.Column("next_run_time", sa.Float(precision=25), nullable=True),
        sa.Column("job_state", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_apscheduler_jobs")),
    )
    with op.batch_alter_table("apscheduler_jobs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_apscheduler_jobs_next_run_time"), ["next_run_time"], unique=False)

    op.create_table(
        "digest_posts",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("slot_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("message_ts", sa.String(length=32), nullable=True),
        sa.Column("late", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_digest_posts")),
        sa.UniqueConstraint("channel", "slot_at", name="uq_digest_posts_channel_slot"),
    )


def downgrade() -> None:

    op.drop_table("digest_posts")
    with op.batch_alter_table("apscheduler_jobs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_apscheduler_jobs_next_run_time"))

    op.drop_table("apscheduler_jobs")
