"""Registrations: the model versions that approval requests led to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlmodel import Session, col, or_, select

from storage.models import ApprovalRequest, Registration, Run
from storage.repos.common import DuplicateError


def create_registration(session: Session, **fields: Any) -> Registration:
    """Insert a registration; raise DuplicateError when model+version exists."""
    if get_registration(session, model=fields["model"], version=fields["version"]) is not None:
        raise DuplicateError(f"{fields['model']}:{fields['version']} is registered already")
    registration = Registration(**fields)
    session.add(registration)
    session.flush()
    return registration


def list_registrations(session: Session, *, model: str) -> Sequence[Registration]:
    """A model's registrations, oldest first."""
    return session.exec(select(Registration).where(Registration.model == model).order_by(col(Registration.id))).all()


def get_registration(session: Session, *, model: str, version: str) -> Registration | None:
    """The registration of model:version."""
    return session.exec(
        select(Registration).where(Registration.model == model, Registration.version == version)
    ).first()


def registration_for_request(session: Session, *, request_id: int) -> Registration | None:
    """The registration an approval request led to, if any."""
    return session.exec(select(Registration).where(Registration.request_id == request_id)).first()


def registrations_of(session: Session, *, user: str, limit: int = 5) -> Sequence[tuple[Registration, Run]]:
    """One query: the newest versions registered from `user`'s runs or at their request, with the run."""
    return session.exec(
        select(Registration, Run)
        .join(Run, col(Run.id) == col(Registration.run_id))
        .outerjoin(ApprovalRequest, col(ApprovalRequest.id) == col(Registration.request_id))
        .where(or_(Run.requester == user, ApprovalRequest.requester == user))
        .order_by(col(Registration.registered_at).desc(), col(Registration.id).desc())
        .limit(limit)
    ).all()
