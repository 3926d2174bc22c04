"""The watcher: each tick turns Polyaxon's state into card edits and thread posts.

Polyaxon is read through a change feed (bot.watch.changes): a tick lists only the runs Polyaxon changed since
the previous one, whatever the number of active runs, and their listing carries status, metrics and liveness.
Per-run requests are made only for what happened: a status change (its conditions; a success's metric summary;
a failure's logs) and a waiting run that moved (its conditions). All state lives in the database, so a
restarted bot (even after SIGKILL) picks up where it was: no duplicate posts, no missed terminal state.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING

from bot.failures import WAITING, FailureService, routine_warning
from bot.runs import RunService
from bot.runs.parked import tell_parked
from bot.watch.changes import RESYNC_EVERY, ChangeFeed
from bot.watch.lost import LostWatch
from bot.watch.outage import PolyaxonOutage
from bot.watch.passes import WATCH_RUN, TickPasses, TickStats
from bot.watch.progress import RUNNING, Progress
from bot.watch.report import checkpoint_step, resumed_text
from bot.watch.transitions import Transitions
from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from bot.polyaxon import RemoteView, RunInfo
    from bot.preflight import PreflightService
    from bot.registry import RegistrationService
    from bot.release import ReleaseService
    from bot.sweeps import SweepFollower
    from bot.usage import UsageService

log = logging.getLogger(__name__)

# A transition recorded less than this long ago may be being told right now by the thread that recorded it (a
# command's, or another replica's): only older unposted ones are a crash's leftovers to tell.
RECOVER_AFTER = timedelta(seconds=10)


class Watcher:
    """Polls Polyaxon for the bot's active runs and reports what changed."""

    def __init__(
        self,
        *,
        runs: RunService,
        clock: Callable[[], datetime],
        stuck_after: timedelta,
        resync_every: timedelta = RESYNC_EVERY,
        registry: RegistrationService | None = None,
        preflights: PreflightService | None = None,
        release: ReleaseService | None = None,
        sweeps: SweepFollower | None = None,
        still_leader: Callable[[], bool] | None = None,
        recover_after: timedelta = RECOVER_AFTER,
        failures: FailureService | None = None,
        usage: UsageService | None = None,
    ) -> None:
        self.runs = runs
        self.failures = failures or FailureService(runs.deps, runs.thread)
        # Between runs of a long tick: does this replica still hold the watcher lease? (Always, without one.)
        self.still_leader = still_leader or (lambda: True)
        self.registry = registry
        self.preflights = preflights
        self.release = release
        self.sweeps = sweeps
        self.recover_after = recover_after
        self.sessions = runs.sessions
        self.gateway = runs.gateway
        self.clock = clock
        self.feed = ChangeFeed(runs.gateway, clock=clock, resync_every=resync_every)
        self.progress = Progress(
            runs, stuck_after=stuck_after, mention=self.failures.mention, tell=self.failures.notifier.tell
        )
        self.lost = LostWatch(runs)
        self.outage = PolyaxonOutage(runs, clock)
        # What a status change says; an ended run's accelerator-hours go on its card (`usage`), and the channel hears
        # once when 80 % of its budget is spent.
        self.transitions = Transitions(runs, self.failures, clock, usage=usage, health=self.progress.health)

    def tick(self) -> TickStats:
        """One pass: tell unposted transitions, retry pending submissions, poll, report changes, settle the rest.

        Every pass and every item in it is isolated (bot.watch.passes, bot.background): a failing one is
        recorded, backed off and at last parked, and never keeps the others from moving.
        """
        started = time.perf_counter()
        stats = TickStats()
        passes = TickPasses(self, stats)
        passes.before_poll()
        remote = passes.run("poll", lambda: self._poll(stats))
        passes.after_poll(remote)
        stats.seconds = time.perf_counter() - started
        return stats

    def _poll(self, stats: TickStats) -> RemoteView | None:
        """Polyaxon's changes since the last tick, then each run's transitions and progress; the view."""
        from bot.polyaxon import GatewayError, PolyaxonUnreachableError

        with self.sessions() as s:
            heads = repos.active_run_heads(s)
        stats.active = len(heads)
        if not heads:
            self.feed.forget()
            return None
        try:
            remote = self.feed.read()
        except GatewayError as exc:
            # Reported, never swallowed: the log says why, the next tick retries from the same cursor, and an
            # outage that lasts is told once on the active runs' cards (bot.watch.outage).
            log.warning("watcher: Polyaxon is unreachable: %s", exc)
            stats.errors.append(str(exc))
            if isinstance(exc, PolyaxonUnreachableError):
                stats.card_edits += self.outage.down(exc)
            return None
        stats.polyaxon_requests += remote.requests
        stats.card_edits += self.outage.up()
        now = self.clock()
        # Only the runs this tick has something to do with are loaded whole: those Polyaxon changed (all, after a
        # full list), those waiting to start (their deadline) and those that may be stuck. A sweep is followed as
        # a whole (bot.sweeps); its trials are not active runs at all.
        wanted = [
            head.id
            for head in heads
            if head.kind != "sweep"
            and (
                remote.complete
                or head.polyaxon_uuid in remote.runs
                or head.status in WAITING
                or (
                    head.status in RUNNING
                    and not head.stuck_flagged
                    and now - head.moved_at >= self.progress.stuck_after
                )
            )
        ]
        with self.sessions() as s:
            active = repos.get_runs(s, wanted)
        # Runs that have not started: new status conditions told, start deadlines enforced.
        waiting_told = True
        try:
            stats.polyaxon_requests += self.failures.waiting.watch(active, remote, now)
        except GatewayError as exc:
            log.warning("watcher: waiting runs: %s", exc)
            stats.errors.append(f"waiting runs: {exc}")
            waiting_told = False  # their new conditions may be untold: a waiting run listed again is read again
        watching = self.runs.deps.items.batch(WATCH_RUN, [str(run.id) for run in active])
        for run in active:
            if not self.still_leader():
                # Another replica took the watcher over: it reports the rest, from the same database.
                log.warning("watcher: lease lost mid-tick; leaving the remaining runs to the new holder")
                return remote
            if remote.unchanged(run.polyaxon_uuid or ""):
                continue  # nothing new in Polyaxon: the database already says what it says
            # Each run on its own: one that keeps failing (a channel the bot cannot post to, a bug) is backed off
            # and at last parked, and told; the others' cards move on.
            tried = watching.attempt(
                str(run.id),
                partial(self._watch_one, run, remote, now, stats),
                run_id=run.id,
                tell=partial(self._gave_up, run),
            )
            if tried.error is not None:
                stats.errors.append(f"{run.name}: {tried.error}")
            info = remote.get(run.polyaxon_uuid or "")
            if tried.ok and info is not None and (waiting_told or run.status not in WAITING):
                self.feed.handled(info)  # the overlap may list it again: unchanged, it costs nothing then
        stats.stuck_flagged += self.progress.flag_stuck(active, now)
        return remote

    # --- one run -----------------------------------------------------------------------------------

    def _watch_one(self, run: Run, remote: RemoteView, now: datetime, stats: TickStats) -> None:
        uuid = run.polyaxon_uuid or ""
        info = remote.get(uuid)
        if info is None:  # a full list without it: it ended, or Polyaxon no longer has it (recorded lost)
            info = self.lost.read_missing(run)
            stats.polyaxon_requests += 2
            if info is None:
                stats.transitions += 1
                return
        run = self._note_outputs(run, info)
        if info.status != run.status and not info.conditions:
            # A listed run does not carry them: the transition's reason is in them (a waiting run's were read).
            info.conditions = self.gateway.run_conditions(uuid)
            stats.polyaxon_requests += 1
        if info.status == "warning" and routine_warning(info.conditions):
            # The operator's `warning: ContainersNotReady: containers with unready status: […]` while the pod's init
            # containers run, on every run (and after a scheduling problem cleared, in place of its warning): the run
            # is starting, and nothing is wrong.
            info.status = "starting"
        if info.status != run.status:
            self.transitions.report(run, info, stats)
            stats.transitions += 1
            return
        if run.status in RUNNING:
            stats.refreshed += int(self.progress.note(run, info, now))

    def _note_outputs(self, run: Run, info: RunInfo) -> Run:
        """What the trainer reported in its outputs: the latest complete checkpoint, and where a resume started."""
        step = checkpoint_step(info.outputs)
        if step is not None and step != run.checkpoint_step:
            with self.sessions() as s:
                fresh = repos.get_run(s, run_id=run.id or 0)
                if fresh is not None:
                    run = repos.update_run(s, fresh, checkpoint_step=step)
        resumed = resumed_text(info.outputs, run)
        if resumed is not None and run.parent_run_id is not None:
            with self.sessions() as s:
                told = repos.find_posted_message(s, run_id=run.id or 0, purpose="resumed") is not None
            if not told:
                self.runs.thread.post_thread(run, resumed, purpose="resumed")
        return run

    def _gave_up(self, run: Run, error: str) -> None:
        """Watching the run is parked: its thread hears it (else its requester); the others go on."""
        tell_parked(self.runs.deps, self.runs.thread, run, what="watching it", error=error)
