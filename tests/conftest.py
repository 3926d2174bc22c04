"""Shared fixtures: a migrated database on SQLite and, where configured, PostgreSQL."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.engine import Engine, make_url

from storage.db import SessionFactory, make_engine
from tests.fixtures.db import migrate

POSTGRES_ENV = "FINETUNE_TEST_POSTGRES_URL"

# The suite runs on 2 cores: two workers, each with its own Polyaxon stack running several training jobs at once,
# plus the tests that train in-process. With torch's default of one OpenMP thread per core every process spins
# threads the others need, and tiny-model steps ran 5-30x slower than alone. One thread per process, as a pod's
# CPU limit would give it; set before anything imports torch (the stacks pass it on to their jobs).
os.environ.setdefault("OMP_NUM_THREADS", "1")


def postgres_url() -> str | None:
    """The PostgreSQL URL tests use; in CI its absence is an error, not a skip."""
    url = os.environ.get(POSTGRES_ENV)
    if not url and os.environ.get("CI"):
        raise RuntimeError(f"{POSTGRES_ENV} must be set in CI (.ci/run sets it)")
    return url


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A SQLite file URL in the test's tmp dir (not migrated)."""
    return f"sqlite:///{tmp_path / 'bot.db'}"


@pytest.fixture
def pg_schema_url() -> Iterator[str]:
    """A PostgreSQL URL whose search_path is a fresh, empty schema dropped after the test."""
    url = postgres_url()
    if url is None:
        pytest.skip(f"{POSTGRES_ENV} is not set")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = make_engine(url)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    parsed = make_url(url)
    query = dict(parsed.query)
    query["options"] = f"-csearch_path={schema}"
    yield parsed.set(query=query).render_as_string(hide_password=False)
    with admin.begin() as conn:
        conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    admin.dispose()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request: pytest.FixtureRequest) -> str:
    """An empty database URL, once per backend."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_schema_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    """A migrated engine, once per backend."""
    eng = make_engine(database_url)
    migrate(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def sessions(engine: Engine) -> SessionFactory:
    """A session factory on the migrated engine."""
    return SessionFactory(engine)
