"""Polyaxon not answering, as the watcher meets it: recorded once per outage, told once on the active runs' cards
once it has lasted a while, and taken off them when Polyaxon answers again.

A tick that cannot read Polyaxon's changes leaves every card as it was; without this, cards would go quiet and
look current. The state is a row (`service_outages`), so every replica's card edits and a restarted bot say the
same. Nothing is lost meanwhile: the change feed resumes from its cursor when Polyaxon answers.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from bot.runs.card import OUTAGE_SERVICE as SERVICE
from storage import repos

if TYPE_CHECKING:
    from bot.polyaxon import PolyaxonUnreachableError
    from bot.runs import RunService

log = logging.getLogger(__name__)

# A blip (one slow answer, a restart of a few seconds) is not worth two edits of every card.
TELL_AFTER = timedelta(seconds=30)


class PolyaxonOutage:
    """Records, tells and ends an outage of Polyaxon for the watcher."""

    def __init__(self, runs: RunService, clock: Callable[[], datetime], tell_after: timedelta = TELL_AFTER) -> None:
        self.runs = runs
        self.clock = clock
        self.tell_after = tell_after
        # Whether an outage row may be open: unknown at start (a restart mid-outage, another replica's), so the first
        # answer from Polyaxon looks once; after that only an outage this watcher met opens one, and an idle tick
        # reads nothing for it.
        self._maybe_open = True

    def down(self, error: PolyaxonUnreachableError) -> int:
        """Polyaxon did not answer this tick: the outage recorded; the cards told once it is old enough (edits)."""
        now = self.clock()
        self._maybe_open = True
        with self.runs.sessions() as s:
            outage = repos.record_outage(s, service=SERVICE, host=error.host, error=str(error), now=now)
            since = outage.since
        if now - since < self.tell_after:
            return 0
        with self.runs.sessions() as s:
            if not repos.claim_outage_told(s, service=SERVICE, now=now):
                return 0
        log.warning("Polyaxon at %s has not answered since %s: telling the active runs' cards", error.host, since)
        return self._edit_active_cards()

    def up(self) -> int:
        """Polyaxon answered: the outage ended; the cards that said so no longer do (edits)."""
        if not self._maybe_open:
            return 0
        self._maybe_open = False
        with self.runs.sessions() as s:
            outage = repos.current_outage(s, service=SERVICE)
            if outage is None:
                return 0
            told = outage.told_at is not None
            since = outage.since
            repos.end_outage(s, service=SERVICE)
        log.warning("Polyaxon answers again (not answering since %s)", since)
        return self._edit_active_cards() if told else 0

    def _edit_active_cards(self) -> int:
        with self.runs.sessions() as s:
            runs = repos.get_runs(s, [head.id for head in repos.active_run_heads(s) if head.kind != "sweep"])
        # Paced by the card edits (a card edited just now waits its turn, the newest state wins).
        return sum(int(self.runs.thread.update_card(run)) for run in runs if run.card_ts)
