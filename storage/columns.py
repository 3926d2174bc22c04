"""Column helpers shared by every table module: aware-UTC timestamps, JSON columns, constraint names."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.types import TypeDecorator
from sqlmodel import Field, SQLModel

# Named constraints, so later migrations can alter them (SQLite batch mode needs names).
SQLModel.metadata.naming_convention = {
    "ix": "ix_%(table_name)s_%(column_0_name)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Now, timezone-aware UTC."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """Stores UTC, always returns an aware datetime (SQLite has no timezone type)."""

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        """Refuse naive datetimes; store UTC."""
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime: storage takes timezone-aware UTC only")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: sa.Dialect) -> datetime | None:
        """Mark values read back as UTC."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _ts(*, nullable: bool = True, index: bool = False) -> Any:
    return Field(default=None, sa_column=sa.Column(UTCDateTime(), nullable=nullable, index=index))


def _created(*, index: bool = False) -> Any:
    return Field(default_factory=utcnow, sa_column=sa.Column(UTCDateTime(), nullable=False, index=index))


def _json(default: Any) -> Any:
    return Field(default_factory=default, sa_column=sa.Column(sa.JSON(), nullable=False))
