"""Engine and session factory: SQLite (one file, WAL) by default, PostgreSQL via psycopg."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.pool import StaticPool
from sqlmodel import Session, create_engine


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """Create an engine for `url`; SQLite gets WAL, foreign keys and a busy timeout on every connection."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        in_memory = parsed.database in (None, "", ":memory:")
        kwargs: dict[str, Any] = {"connect_args": {"check_same_thread": False, "timeout": 30}}
        if in_memory:
            # One shared connection, or every session would see its own empty database.
            kwargs["poolclass"] = StaticPool
        engine = create_engine(url, echo=echo, **kwargs)
        event.listen(engine, "connect", _sqlite_pragmas)
        return engine
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        return create_engine(parsed, echo=echo, pool_pre_ping=True, pool_size=10, max_overflow=20)
    raise ValueError(f"unsupported database URL scheme {parsed.drivername!r}: use sqlite:/// or postgresql+psycopg://")


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    cursor.execute("PRAGMA journal_mode=WAL")
    # SQLite's default, said here because it is the bot's: a commit is on disk when it returns. The delivery
    # intake's own connection relaxes it to NORMAL unless FINETUNE_ACK_DURABILITY=power (bot/deliveries/intake.py).
    cursor.execute("PRAGMA synchronous=FULL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.close()


class SessionFactory:
    """Hands out sessions bound to one engine; `with factory() as s:` commits on success."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    @contextmanager
    def __call__(self) -> Iterator[Session]:
        """Open a session, commit when the block succeeds, roll back when it raises."""
        with Session(self.engine, expire_on_commit=False) as session:
            try:
                yield session
                session.commit()
            except BaseException:
                session.rollback()
                raise
