"""Run a scheduled job on one replica at a time: each tick first takes or renews a database lease."""

from __future__ import annotations

import logging
import os
import socket
import uuid
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TypeVar

from sqlalchemy.exc import SQLAlchemyError

from storage.db import SessionFactory
from storage.leases import hold_lease, release_lease

log = logging.getLogger("finetune_bot.lease")

T = TypeVar("T")


def holder_id() -> str:
    """This process, as a lease holder: host, pid and a random part (a restarted pid is another holder)."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


class LeaseGuard:
    """Calls a job only while this process holds the named lease.

    The lease lasts `ttl` and is renewed at every tick, so a replica that dies (even SIGKILL) hands the
    job over within `ttl` plus one tick. The ttl must exceed the longest tick, or a slow holder could
    see its job taken over while still running it.
    """

    def __init__(
        self,
        *,
        sessions: SessionFactory,
        name: str,
        ttl: timedelta,
        clock: Callable[[], datetime],
        holder: str | None = None,
    ) -> None:
        self.sessions = sessions
        self.name = name
        self.ttl = ttl
        self.clock = clock
        self.holder = holder or holder_id()
        self.holding = False
        self._held_at: datetime | None = None

    def hold(self) -> bool:
        """Take or renew the lease; False when another live replica holds it (or the database is down)."""
        try:
            with self.sessions() as s:
                held = hold_lease(s, name=self.name, holder=self.holder, ttl=self.ttl, now=self.clock())
        except SQLAlchemyError as exc:
            # Without the database nobody can know who holds it: do not run the job.
            log.warning("lease %s: database unreachable, skipping this tick: %s", self.name, exc)
            held = False
        if held != self.holding:
            log.info("lease %s %s by %s", self.name, "taken" if held else "lost", self.holder)
        self.holding = held
        self._held_at = self.clock() if held else None
        return held

    def still_held(self) -> bool:
        """During a long job: renew once a third of the ttl has passed; False once the lease is lost."""
        if not self.holding or self._held_at is None:
            return False
        if self.clock() - self._held_at < self.ttl / 3:
            return True
        return self.hold()

    def run(self, job: Callable[[], T]) -> T | None:
        """`job()` when the lease is held, else None."""
        return job() if self.hold() else None

    def release(self) -> None:
        """Give the lease up (clean shutdown)."""
        if not self.holding:
            return
        try:
            with self.sessions() as s:
                release_lease(s, name=self.name, holder=self.holder)
        except SQLAlchemyError as exc:
            log.warning("lease %s: could not release it (it expires on its own): %s", self.name, exc)
        self.holding = False
