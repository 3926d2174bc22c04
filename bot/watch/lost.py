"""The watcher's side of runs Polyaxon no longer has: found by a full list, confirmed by one read, recorded once.

A complete view (bot.watch.changes: at start and every resync) lists every active run of the project. An active
run it lacks has ended, or Polyaxon no longer has it (deleted in its UI, the server replaced, the project gone):
one read of the run tells which. A run Polyaxon no longer has is recorded `lost` (bot.runs.lost: its card and
one thread post), and a lost run is no longer active, so no later tick asks Polyaxon about it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.runs import RunService
from bot.runs.lost import LostRuns
from storage.models import Run

if TYPE_CHECKING:
    from bot.polyaxon import RunInfo


class LostWatch:
    """Reads an active run a complete list lacks; records it lost when Polyaxon no longer has it."""

    def __init__(self, runs: RunService) -> None:
        self.gateway = runs.gateway
        self.lost = LostRuns(runs.deps, runs.thread)

    def read_missing(self, run: Run) -> RunInfo | None:
        """The run's final state (two requests: the run and its conditions); None when it is gone, recorded lost."""
        from bot.polyaxon import RunGoneError

        try:
            return self.gateway.get_run(run.polyaxon_uuid or "", with_conditions=True)
        except RunGoneError as gone:
            self.lost.mark(run, host=gone.host)
            return None
