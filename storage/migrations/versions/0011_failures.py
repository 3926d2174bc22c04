"""When runs go wrong: a run's failure policy, its attempt, why it failed and the condition last told.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-04 16:00:00.000000
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.add_column(sa.Column("policy", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("attempt", sa.Integer(), server_default="1", nullable=False))
        batch_op.add_column(sa.Column("first_attempt_id", sa.Integer(), nullable=True))
        batch_op.add_column(sa.Column("failure", sa.JSON(), nullable=True))
        batch_op.add_column(sa.Column("condition", sa.String(length=512), nullable=True))
        batch_op.create_foreign_key("fk_runs_first_attempt_id_runs", "runs", ["first_attempt_id"], ["id"])
        batch_op.create_unique_constraint("uq_runs_first_attempt_attempt", ["first_attempt_id", "attempt"])


def downgrade() -> None:
    with op.batch_alter_table("runs", schema=None) as batch_op:
        batch_op.drop_constraint("uq_runs_first_attempt_attempt", type_="unique")
        batch_op.drop_constraint("fk_runs_first_attempt_id_runs", type_="foreignkey")
        batch_op.drop_column("condition")
        batch_op.drop_column("failure")
        batch_op.drop_column("first_attempt_id")
        batch_op.drop_column("attempt")
        batch_op.drop_column("policy")
