"""The ledger of deliveries: admitted before the ack, finished after the work, recovered when a process died.

Each process keeps a lease `process:<holder>` alive (renewed by its heartbeat job); a delivery still
`received` whose holder has no live lease was acked by a process that died before finishing it. Any live
replica may take it over with one conditional UPDATE, so exactly one carries it out again. Carrying a
delivery out twice is harmless: a run is named after its delivery (Polyaxon gets it once), approvals and
digests schedules are keyed, and replies say what is already there.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy.exc import SQLAlchemyError

from bot.deliveries.intake import DeliveryIntake
from bot.deliveries.keys import key_of
from storage import repos
from storage.db import SessionFactory
from storage.leases import hold_lease, live_holders, release_lease
from storage.models import Delivery

log = logging.getLogger(__name__)

PROCESS_LEASE = "process:"
# Slack's (legacy) verification token, in every delivery body, and a Workflow Builder step's execution token (a
# delivery carried out again completes its step with the bot token).
SECRET_FIELDS = frozenset({"token", "bot_access_token"})
# A delivery this young may still be on its way through a live process's pool, whatever the leases say.
RECOVERY_GRACE = timedelta(seconds=5)
# After this many attempts a delivery is given up (and said so in the log): its work keeps failing.
MAX_ATTEMPTS = 3
# Finished deliveries are kept this long (Slack retries within minutes), and purged at most this often.
RETENTION = timedelta(days=1)
PURGE_EVERY = timedelta(minutes=10)


def strip_secrets(body: Mapping[str, Any]) -> dict[str, Any]:
    """The delivery as it may be stored: Slack's verification tokens removed, at any depth."""

    def strip(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {k: strip(v) for k, v in value.items() if k not in SECRET_FIELDS}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    return dict(strip(body))


class DeliveryLedger:
    """Admits deliveries before their ack, finishes them after their work, and takes over dead processes' ones."""

    def __init__(
        self,
        *,
        sessions: SessionFactory,
        clock: Callable[[], datetime],
        holder: str,
        ttl: timedelta,
        intake: DeliveryIntake | None = None,
    ) -> None:
        self.sessions = sessions
        # The group-committing writer of admits (serve); without one each admit commits in a session of its own.
        self.intake = intake
        self.clock = clock
        self.holder = holder
        self.ttl = ttl
        self._purged_at: datetime | None = None

    def admit(self, body: Mapping[str, Any]) -> bool:
        """Record the delivery (before it is acked); False when it was seen before (a retry: ack, do nothing)."""
        found = key_of(body)
        if found is None:
            return True  # url_verification and other deliveries that carry no work
        kind, key = found
        payload, now = strip_secrets(body), self.clock()
        if self.intake is not None and not self.intake.closed:
            return self.intake.admit(
                repos.delivery_row(key=key, kind=kind, payload=payload, holder=self.holder, now=now)
            )
        with self.sessions() as s:
            return repos.admit_delivery(s, key=key, kind=kind, payload=payload, holder=self.holder, now=now)

    def finish(self, body: Mapping[str, Any]) -> None:
        """The delivery's work is done: answered, or failed and reported."""
        found = key_of(body)
        if found is None:
            return
        if self.intake is not None and not self.intake.closed:
            self.intake.finish(found[1], self.clock())
            return
        with self.sessions() as s:
            repos.finish_delivery(s, key=found[1], now=self.clock())

    def forget(self, body: Mapping[str, Any]) -> None:
        """Drop a delivery no listener took (Bolt answered it 404): it carries no work, now or later."""
        found = key_of(body)
        if found is not None:
            with self.sessions() as s:
                repos.forget_delivery(s, key=found[1])

    def purge(self, *, older_than: timedelta = RETENTION) -> int:
        """Delete finished deliveries older than Slack's retry window (at most every PURGE_EVERY per process);
        how many went. Slack retries a delivery within minutes: a day is plenty to tell a retry."""
        now = self.clock()
        if self._purged_at is not None and now - self._purged_at < PURGE_EVERY:
            return 0
        self._purged_at = now
        try:
            with self.sessions() as s:
                return repos.purge_deliveries(s, received_before=now - older_than)
        except SQLAlchemyError as exc:
            log.warning("deliveries: could not purge old deliveries (retried later): %s", exc)
            return 0

    def heartbeat(self) -> bool:
        """Renew this process's lease: its unfinished deliveries are its own while it lives."""
        try:
            with self.sessions() as s:
                return hold_lease(
                    s, name=PROCESS_LEASE + self.holder, holder=self.holder, ttl=self.ttl, now=self.clock()
                )
        except SQLAlchemyError as exc:
            log.warning("deliveries: can't renew this process's lease (database unreachable): %s", exc)
            return False

    def release(self) -> None:
        """A clean stop: this process's lease goes at once (its deliveries are finished by then, or taken over)."""
        if self.intake is not None:
            self.intake.close()
        try:
            with self.sessions() as s:
                release_lease(s, name=PROCESS_LEASE + self.holder, holder=self.holder)
        except SQLAlchemyError as exc:
            log.warning("deliveries: could not release this process's lease (it expires on its own): %s", exc)

    def orphans(self) -> list[Delivery]:
        """Unfinished deliveries whose process is gone (no live lease), oldest first."""
        now = self.clock()
        with self.sessions() as s:
            alive = live_holders(s, prefix=PROCESS_LEASE, now=now)
            pending = repos.unfinished_deliveries(s, received_before=now - RECOVERY_GRACE)
        return [d for d in pending if d.holder != self.holder and d.holder not in alive]

    def take_over(self, delivery: Delivery) -> bool:
        """Claim an orphan for this process; False when another replica claimed it first (or gave it up)."""
        with self.sessions() as s:
            if delivery.attempts >= MAX_ATTEMPTS:
                log.error(
                    "deliveries: giving up %s after %d attempts (its work keeps failing)",
                    delivery.key,
                    delivery.attempts,
                )
                repos.finish_delivery(s, key=delivery.key, now=self.clock())
                return False
            return repos.claim_delivery(s, key=delivery.key, from_holder=delivery.holder, to_holder=self.holder)

    def recover(self, redo: Callable[[str, dict[str, Any]], None]) -> int:
        """Carry out every orphan this process wins, once; how many it carried out."""
        done = 0
        for delivery in self.orphans():
            if delivery.payload is None or not self.take_over(delivery):
                continue
            log.warning("deliveries: carrying out %s %s, acked by a process that died", delivery.kind, delivery.key)
            redo(delivery.kind, dict(delivery.payload))
            done += 1
        return done
