"""The watcher tick's passes around Polyaxon's changes, each one isolated, and each of their items too.

A pass that raises (a bug, a Slack error nobody expected) is recorded (`bot.background`, kind `tick_pass`) and
tried again next tick, and the tick goes on with the next pass: one bad pass never stops card edits, serving
checks or webhook deliveries. Inside the passes, items are isolated one by one where they are found (pending
submissions, unposted transitions, each watched run, webhook events, approval requests).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from bot.runs.parked import tell_parked
from bot.slack.blocks import escape
from storage import repos
from storage.models import Run, StatusEvent, utcnow

if TYPE_CHECKING:
    from bot.polyaxon import RemoteView
    from bot.watch.watcher import Watcher

log = logging.getLogger(__name__)

T = TypeVar("T")

# Kinds of background items (bot.background) the watcher owns.
TICK_PASS = "tick_pass"
WATCH_RUN = "watch_run"
UNPOSTED = "unposted_transition"


@dataclass
class TickStats:
    """What one tick did (the benchmark and tests read it)."""

    active: int = 0
    polyaxon_requests: int = 0
    transitions: int = 0
    stuck_flagged: int = 0
    recovered_posts: int = 0
    refreshed: int = 0
    card_edits: int = 0
    seconds: float = 0.0
    errors: list[str] = field(default_factory=list)


class TickPasses:
    """One tick's passes, in order, each isolated; the watcher's collaborators are read as they are now (tests
    switch one off by setting it to None)."""

    def __init__(self, watcher: Watcher, stats: TickStats) -> None:
        self.watcher = watcher
        self.stats = stats
        self.items = watcher.runs.deps.items
        self.batch = self.items.batch(TICK_PASS)

    def run(self, name: str, fn: Callable[[], T]) -> T | None:
        """One pass on its own: its failure is recorded and counted in the tick's errors, never raised."""
        tried = self.batch.attempt(name, fn, parks=False)
        if tried.error is not None:
            self.stats.errors.append(f"{name}: {tried.error}")
        return tried.value

    def before_poll(self) -> None:
        """Unposted transitions, pending submissions, failed attempts' retries, approval requests."""
        w, stats = self.watcher, self.stats
        self.run("unposted", self.recover_unposted)
        # Direct messages to requesters that Slack refused or a dead process left claimed (bot.notify).
        self.run("requester_dms", w.failures.notifier.retry_unsent)
        stats.transitions += self.run("pending_submissions", w.runs.retry_pending) or 0
        # Failed attempts whose retry was decided but not started (a crash, Polyaxon down) start here.
        retried, retry_errors = self.run("failed_attempts", lambda: w.failures.retry_due(w.clock())) or (0, [])
        stats.transitions += retried
        stats.errors += retry_errors
        if w.registry is not None:
            # Approved requests whose registration failed (Polyaxon down) register here, once it is back; open
            # requests past their expiry close (each request on its own, in bot.registry).
            self.run("approval_expiry", w.registry.expire_due)
            self.run("registrations", w.registry.retry_pending)

    def after_poll(self, remote: RemoteView | None) -> None:
        """Sweeps, preflights, the release path, then the card edits held back."""
        w, stats = self.watcher, self.stats
        sweeps, preflights, release = w.sweeps, w.preflights, w.release
        if sweeps is not None:
            # Sweeps are followed as wholes: one request per sweep lists its trials, whatever their number.
            followed = self.run("sweeps", lambda: sweeps.follow(remote, w.still_leader))
            if followed is not None:
                stats.polyaxon_requests += followed.polyaxon_requests
                stats.transitions += followed.transitions
                stats.errors += followed.errors
        if preflights is not None:
            # Every preflight whose run has ended (in this tick, or before a restart) is settled here, once: its
            # report is the gate's evidence at once.
            stats.transitions += self.run("preflights", preflights.settle) or 0
        if release is not None:
            # Ended serving checks are settled (report, verdict, the promotion request), stage moves Polyaxon
            # refused are retried, and due webhook events go out: never blocking an approval.
            outcome = self.run("release", release.tick)
            if outcome is not None:
                changed, delivery = outcome
                stats.transitions += changed
                if delivery.failed:
                    stats.errors.append(f"release webhook: {delivery.failed} event(s) not delivered, retried later")
        # Card edits held back (Slack's pace, a 429) go now with each card's newest state, where they may.
        stats.card_edits += self.run("card_edits", w.runs.thread.flush_cards) or 0

    def recover_unposted(self) -> None:
        """Tell transitions that were recorded but not posted (the bot died between the two), each on its own."""
        w = self.watcher
        with w.sessions() as s:
            # Recorded with the database's clock (storage.models.utcnow), so compared with it, not the watcher's.
            pending = list(repos.unposted_status_events(s, before=utcnow() - w.recover_after))
        batch = self.items.batch(UNPOSTED, [str(event.id) for event, _ in pending])
        for event, run in pending:
            batch.attempt(
                str(event.id),
                partial(self.tell_unposted, event, run),
                run_id=run.id,
                tell=partial(self.gave_up, run, "telling its status"),
            )

    def tell_unposted(self, event: StatusEvent, run: Run) -> None:
        """One recorded transition, told (the thread is read back first: the post may have gone out)."""
        thread = self.watcher.runs.thread
        if thread.tell_transition(
            run, event_id=event.id or 0, status=event.status, text=f"Status: *{escape(event.status)}*", recovering=True
        ):
            self.stats.recovered_posts += 1
        thread.update_card(run, force=True)
        if event.status in repos.TERMINAL_STATUSES:
            # The direct message its requester chose, unless the process that recorded it claimed it already.
            self.watcher.failures.notifier.tell_end(run, event.status)

    def gave_up(self, run: Run, what: str, error: str) -> None:
        """A run's item is parked: its thread hears it, else its requester."""
        runs = self.watcher.runs
        tell_parked(runs.deps, runs.thread, run, what=what, error=error)
