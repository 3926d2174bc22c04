"""Migrations create the schema on SQLite and PostgreSQL, and match the models exactly."""

from __future__ import annotations

from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import inspect
from sqlalchemy.engine import Engine
from sqlmodel import SQLModel

from storage.db import make_engine
from storage.migrate import current_revision, downgrade, head_revision, pending, upgrade

TABLES = {
    "runs",
    "status_events",
    "posted_messages",
    "deliveries",
    "approval_requests",
    "approvals",
    "approval_notices",
    "registrations",
    "digest_schedules",
    "audit_entries",
    "digest_posts",
    "leases",
    "apscheduler_jobs",
    "log_follows",
    "user_preferences",
    "requester_notices",
}


def test_upgrade_creates_every_table(engine: Engine) -> None:
    assert set(inspect(engine).get_table_names()) >= TABLES
    assert current_revision(engine) == head_revision()
    assert not pending(engine)


def test_models_and_migrations_agree(engine: Engine) -> None:
    # A model change without a migration shows up here as a non-empty diff.
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn, opts={"compare_type": False}), SQLModel.metadata)
    assert diff == []


def test_fresh_database_is_pending_and_downgrade_removes_schema(database_url: str) -> None:
    eng = make_engine(database_url)
    try:
        assert current_revision(eng) is None
        assert pending(eng)
        upgrade(eng)
        upgrade(eng)  # idempotent
        assert not pending(eng)
        downgrade(eng, "base")
        assert not (TABLES & set(inspect(eng).get_table_names()))
        assert current_revision(eng) is None
    finally:
        eng.dispose()


def test_sqlite_uses_wal_and_foreign_keys(sqlite_url: str) -> None:
    eng = make_engine(sqlite_url)
    try:
        with eng.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        eng.dispose()
