"""Release: serving checks, stage changes, the release webhook's outbox, and a promotion request's stage.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 21:30:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("approval_requests", schema=None) as batch_op:
        batch_op.add_column(sa.Column("stage", sa.String(length=16), nullable=True))

    op.create_table(
        "serving_checks",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("registration_id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("spec_digest", sa.String(length=80), nullable=False),
        sa.Column("prompt_set_digest", sa.String(length=80), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("report", sa.JSON(), nullable=True),
        sa.Column("verdict", sa.JSON(), nullable=False),
        sa.Column("requester", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["registration_id"], ["registrations.id"], name=op.f("fk_serving_checks_registration_id_registrations")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_serving_checks_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_serving_checks")),
        sa.UniqueConstraint("run_id", name=op.f("uq_serving_checks_run_id")),
    )
    with op.batch_alter_table("serving_checks", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_serving_checks_registration_id"), ["registration_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_serving_checks_status"), ["status"], unique=False)

    op.create_table(
        "stage_changes",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("registration_id", sa.Integer(), nullable=False),
        sa.Column("from_stage", sa.String(length=16), nullable=False),
        sa.Column("to_stage", sa.String(length=16), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("request_id", sa.Integer(), nullable=True),
        sa.Column("serving_check_id", sa.Integer(), nullable=True),
        sa.Column("approvers", sa.JSON(), nullable=False),
        sa.Column("actor", sa.String(length=32), nullable=False),
        sa.Column("reason", sa.String(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["registration_id"], ["registrations.id"], name=op.f("fk_stage_changes_registration_id_registrations")
        ),
        sa.ForeignKeyConstraint(
            ["request_id"], ["approval_requests.id"], name=op.f("fk_stage_changes_request_id_approval_requests")
        ),
        sa.ForeignKeyConstraint(
            ["serving_check_id"], ["serving_checks.id"], name=op.f("fk_stage_changes_serving_check_id_serving_checks")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_stage_changes")),
    )
    with op.batch_alter_table("stage_changes", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_stage_changes_model"), ["model"], unique=False)
        batch_op.create_index(batch_op.f("ix_stage_changes_registration_id"), ["registration_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_stage_changes_request_id"), ["request_id"], unique=False)

    op.create_table(
        "release_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("stage_change_id", sa.Integer(), nullable=False),
        sa.Column("payload", sa.JSON(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("next_attempt_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_error", sa.String(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("delivered_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["stage_change_id"], ["stage_changes.id"], name=op.f("fk_release_events_stage_change_id_stage_changes")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_release_events")),
        sa.UniqueConstraint("event_id", name=op.f("uq_release_events_event_id")),
    )
    with op.batch_alter_table("release_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_release_events_stage_change_id"), ["stage_change_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_release_events_status"), ["status"], unique=False)


def downgrade() -> None:
    op.drop_table("release_events")
    op.drop_table("stage_changes")
    op.drop_table("serving_checks")
    with op.batch_alter_table("approval_requests", schema=None) as batch_op:
        batch_op.drop_column("stage")
