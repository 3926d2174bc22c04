"""Initial schema: runs, status events, posted messages, deliveries, approvals, registrations, digests, audit.

Revision ID: 0001
Revises:
Create Date: 2026-12-02 10:09:01.867282
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "deliveries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("received_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deliveries")),
        sa.UniqueConstraint("key", name=op.f("uq_deliveries_key")),
    )
    op.create_table(
        "digest_schedules",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("cron", sa.String(length=64), nullable=False),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("created_by", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_digest_schedules")),
        sa.UniqueConstraint("channel", name=op.f("uq_digest_schedules_channel")),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("polyaxon_uuid", sa.String(length=64), nullable=True),
        sa.Column("recipe_name", sa.String(length=128), nullable=False),
        sa.Column("recipe_hash", sa.String(length=80), nullable=False),
        sa.Column("component", sa.String(length=128), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("presets", sa.JSON(), nullable=False),
        sa.Column("pins", sa.JSON(), nullable=False),
        sa.Column("comparable", sa.Boolean(), nullable=False),
        sa.Column("eval_contract", sa.JSON(), nullable=False),
        sa.Column("eval_contract_hash", sa.String(length=80), nullable=False),
        sa.Column("requester", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("card_ts", sa.String(length=32), nullable=True),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("parent_run_id", sa.Integer(), nullable=True),
        sa.Column("last_metrics", sa.JSON(), nullable=False),
        sa.Column("last_step", sa.Integer(), nullable=True),
        sa.Column("last_activity_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("stuck_flagged_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["parent_run_id"], ["runs.id"], name=op.f("fk_runs_parent_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_runs")),
        sa.UniqueConstraint("name", name=op.f("uq_runs_name")),
        sa.UniqueConstraint("polyaxon_uuid", name=op.f("uq_runs_polyaxon_uuid")),
    )
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_runs_channel"), ["channel"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_eval_contract_hash"), ["eval_contract_hash"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_finished_at"), ["finished_at"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_recipe_name"), ["recipe_name"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_requester"), ["requester"], unique=False)
        batch_op.create_index(batch_op.f("ix_runs_status"), ["status"], unique=False)

    op.create_table(
        "approval_requests",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=True),
        sa.Column("requester", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("message_ts", sa.String(length=32), nullable=True),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("checkpoint_path", sa.String(), nullable=True),
        sa.Column("candidate_digest", sa.String(length=80), nullable=False),
        sa.Column("criteria", sa.JSON(), nullable=False),
        sa.Column("criteria_version", sa.String(length=80), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("decided_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_approval_requests_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approval_requests")),
        sa.UniqueConstraint("channel", "message_ts", name="uq_approval_requests_message"),
    )
    with op.batch_alter_table("approval_requests", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_approval_requests_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_approval_requests_status"), ["status"], unique=False)

    op.create_table(
        "audit_entries",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user", sa.String(length=32), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=True),
        sa.Column("command", sa.String(), nullable=False),
        sa.Column("outcome", sa.String(length=32), nullable=False),
        sa.Column("detail", sa.String(), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_audit_entries_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_entries")),
    )
    with op.batch_alter_table("audit_entries", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_audit_entries_run_id"), ["run_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_audit_entries_user"), ["user"], unique=False)

    op.create_table(
        "posted_messages",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("ts", sa.String(length=32), nullable=False),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("run_id", sa.Integer(), nullable=True),
        sa.Column("purpose", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_posted_messages_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_posted_messages")),
        sa.UniqueConstraint("channel", "ts", name="uq_posted_messages_channel_ts"),
    )
    with op.batch_alter_table("posted_messages", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_posted_messages_run_id"), ["run_id"], unique=False)

    op.create_table(
        "status_events",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("previous_status", sa.String(length=32), nullable=True),
        sa.Column("message", sa.String(), nullable=True),
        sa.Column("observed_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("posted_ts", sa.String(length=32), nullable=True),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_status_events_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_status_events")),
    )
    with op.batch_alter_table("status_events", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_status_events_run_id"), ["run_id"], unique=False)

    op.create_table(
        "approvals",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.Integer(), nullable=False),
        sa.Column("user", sa.String(length=32), nullable=False),
        sa.Column("reaction", sa.String(length=64), nullable=False),
        sa.Column("message_ts", sa.String(length=32), nullable=False),
        sa.Column("approved_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["request_id"], ["approval_requests.id"], name=op.f("fk_approvals_request_id_approval_requests")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_approvals")),
        sa.UniqueConstraint("request_id", "user", name="uq_approvals_request_user"),
    )
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_approvals_request_id"), ["request_id"], unique=False)

    op.create_table(
        "registrations",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.Integer(), nullable=True),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("version", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("artifacts", sa.JSON(), nullable=False),
        sa.Column("polyaxon_version", sa.String(length=128), nullable=True),
        sa.Column("registered_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["request_id"], ["approval_requests.id"], name=op.f("fk_registrations_request_id_approval_requests")
        ),
        sa.ForeignKeyConstraint(["run_id"], ["runs.id"], name=op.f("fk_registrations_run_id_runs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_registrations")),
        sa.UniqueConstraint("model", "version", name="uq_registrations_model_version"),
        sa.UniqueConstraint("request_id", name=op.f("uq_registrations_request_id")),
    )
    with op.batch_alter_table("registrations", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_registrations_run_id"), ["run_id"], unique=False)


def downgrade() -> None:

    with op.batch_alter_table("registrations", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_registrations_run_id"))

    op.drop_table("registrations")
    with op.batch_alter_table("approvals", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approvals_request_id"))

    op.drop_table("approvals")
    with op.batch_alter_table("status_events", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_status_events_run_id"))

    op.drop_table("status_events")
    with op.batch_alter_table("posted_messages", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_posted_messages_run_id"))

    op.drop_table("posted_messages")
    with op.batch_alter_table("audit_entries", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_audit_entries_user"))
        batch_op.drop_index(batch_op.f("ix_audit_entries_run_id"))

    op.drop_table("audit_entries")
    with op.batch_alter_table("approval_requests", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_approval_requests_status"))
        batch_op.drop_index(batch_op.f("ix_approval_requests_run_id"))

    op.drop_table("approval_requests")
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_runs_status"))
        batch_op.drop_index(batch_op.f("ix_runs_requester"))
        batch_op.drop_index(batch_op.f("ix_runs_recipe_name"))
        batch_op.drop_index(batch_op.f("ix_runs_finished_at"))
        batch_op.drop_index(batch_op.f("ix_runs_eval_contract_hash"))
        batch_op.drop_index(batch_op.f("ix_runs_channel"))

    op.drop_table("runs")
    op.drop_table("digest_schedules")
    op.drop_table("deliveries")
