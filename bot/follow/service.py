"""`/finetune logs RUN follow`: one streamed follow per run across replicas, run on this process's own threads.

The command claims the run's follow row (storage.repos.follows), opens the stream at once (so the reply can link
to it) and hands the polls to a thread of its own: a follow lasts up to ten minutes, which the command's
deferred-work pool must never wait on. Each holder renews its lease at every poll. A follow whose holder died
or shut down is taken over by the next `take_over()` pass of any replica (the deliveries job's interval): it
closes the message the holder left streaming ("continued in the next message") and goes on from the lines the
row says went out, until the follow's own deadline; past it, it only closes that message with the 10-minute
line. So no stream is left open for good: at most one lease ttl plus one pass after its holder went.
"""

from __future__ import annotations

import logging
import threading
from functools import partial

from bot.follow.loop import FollowLoop, FollowTiming
from bot.runs.admit import find_run_for
from bot.runs.errors import Reply, RunError
from bot.runs.kinds import Verb
from bot.runs.thread import RunThread
from bot.slack.blocks import escape
from bot.slack.streams import MessageStreams, StreamError
from storage import repos
from storage.models import LogFollow

log = logging.getLogger(__name__)

# Follows one process streams at once: each holds a thread for up to ten minutes.
MAX_FOLLOWS = 16
TAKEOVER = "log_follow_takeover"  # the background pass (bot.background) that takes over orphaned follows


class LogFollower:
    """Starts follows, runs their polls on its own threads, takes over the follows of replicas that went."""

    def __init__(
        self,
        thread: RunThread,
        *,
        holder: str,
        streams: MessageStreams | None = None,
        timing: FollowTiming | None = None,
        max_follows: int = MAX_FOLLOWS,
    ) -> None:
        self.deps = thread.deps
        self.thread = thread
        self.holder = holder
        self.streams = streams or MessageStreams(self.deps.client)
        self.timing = timing or FollowTiming()
        self.max_follows = max_follows
        self._loops: dict[int, FollowLoop] = {}
        # One daemon thread per follow (at most `max_follows`): a follow waits between polls for ten minutes,
        # which must never hold up a process that exits without `shutdown()`, as a pool's worker would.
        self._threads: dict[int, threading.Thread] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()

    def follow(self, ref: str, *, user: str) -> Reply:
        """Start streaming the run's log into its thread, or link to the follow that streams it already."""
        run = find_run_for(self.deps.sessions, ref, Verb.LOGS)
        name = escape(run.name)
        if run.status in repos.TERMINAL_STATUSES:
            raise RunError(
                f"run `{name}` has already {escape(run.status)}: its log will not grow; "
                f"`/finetune logs {name}` posts its last lines"
            )
        if not run.polyaxon_uuid or not run.card_ts:
            raise RunError(f"run `{name}` has not reached Polyaxon yet ({escape(run.status)}); no logs to follow")
        if self.busy():
            raise RunError(
                f"this bot streams {self.max_follows} logs already; try again when one ends, "
                f"or `/finetune logs {name}` for its last lines"
            )
        assert run.id is not None
        now = self.deps.clock()
        with self.deps.sessions() as s:
            claim = repos.claim_follow(
                s,
                run_id=run.id,
                requester=user,
                channel=run.channel,
                thread_ts=run.card_ts,
                holder=self.holder,
                now=now,
                ttl=self.timing.lease_ttl,
                deadline=now + self.timing.follow_for,
            )
        if claim is None:
            return self._already(run.id, name)
        loop = FollowLoop(self.deps, self.streams, claim.follow, holder=self.holder, timing=self.timing)
        try:
            ts = loop.open(orphaned_ts=claim.orphaned_ts)
        except StreamError as exc:
            with self.deps.sessions() as s:
                repos.stop_follow(
                    s, follow_id=loop.follow_id, holder=self.holder, now=self.deps.clock(), reason=str(exc)
                )
            raise RunError(
                f"Slack refused to stream `{name}`'s log ({escape(exc.error)}); nothing is streaming"
            ) from exc
        self._spawn(loop)
        link = self.thread.permalink(run.channel, ts)
        where = f"<{link}|in its thread>" if link else "in its thread"
        return Reply(
            text=f"Streaming `{name}`'s log {where}, secrets redacted, until the run ends "
            f"({round(self.timing.follow_for.total_seconds() / 60)} minutes at most)."
        )

    def _already(self, run_id: int, name: str) -> Reply:
        with self.deps.sessions() as s:
            row = repos.get_follow(s, run_id=run_id)
        link = self.thread.permalink(row.channel, row.stream_ts) if row is not None else None
        where = f": <{link}|the stream>" if link else " in its thread"
        return Reply(text=f"`{name}`'s log is already streaming{where}. One follow per run at a time.")

    def busy(self) -> bool:
        """Whether this process streams as many follows as it may."""
        with self._lock:
            return len(self._loops) >= self.max_follows

    def take_over(self) -> int:
        """Take over the follows whose holder stopped renewing (each on its own); how many this process took."""
        if self._stopping.is_set():
            return 0
        with self.deps.sessions() as s:
            orphans = repos.orphaned_follows(s, now=self.deps.clock())
        batch = self.deps.items.batch(TAKEOVER, [str(row.id) for row in orphans])
        taken = 0
        for row in orphans:
            if self.busy():
                break
            tried = batch.attempt(str(row.id), partial(self._take_over_one, row), run_id=row.run_id)
            taken += bool(tried.value)
        return taken

    def _take_over_one(self, row: LogFollow) -> bool:
        with self.deps.sessions() as s:
            claim = repos.take_over_follow(s, row, holder=self.holder, now=self.deps.clock(), ttl=self.timing.lease_ttl)
        if claim is None:
            return False  # another replica took it first
        log.warning("log follow %s: taken over from %s, whose lease lapsed", row.id, row.holder)
        loop = FollowLoop(self.deps, self.streams, claim.follow, holder=self.holder, timing=self.timing)
        try:
            opened = loop.open(orphaned_ts=claim.orphaned_ts)
        except StreamError:
            with self.deps.sessions() as s:
                repos.release_follow(s, follow_id=loop.follow_id, holder=self.holder, now=self.deps.clock())
            raise  # recorded by the background pass, retried with backoff
        if opened is not None:
            self._spawn(loop)
        return True

    def _spawn(self, loop: FollowLoop) -> None:
        worker = threading.Thread(target=self._run, args=(loop,), name=f"log-follow-{loop.follow_id}", daemon=True)
        with self._lock:
            self._loops[loop.follow_id] = loop
            self._threads[loop.follow_id] = worker
        worker.start()

    def _run(self, loop: FollowLoop) -> None:
        try:
            while not self._stopping.wait(self.timing.poll_s):
                if not loop.step():
                    break
            else:
                loop.release()
        except Exception:
            # The lease lapses and a takeover pass goes on from the row; this thread must not die silently.
            log.exception("log follow %s failed; it will be taken over once its lease lapses", loop.follow_id)
        finally:
            with self._lock:
                self._loops.pop(loop.follow_id, None)
                self._threads.pop(loop.follow_id, None)

    def shutdown(self, timeout_s: float = 30.0) -> None:
        """Stop polling and hand every follow over at once (the next process or replica goes on with them)."""
        self._stopping.set()
        with self._lock:
            workers = list(self._threads.values())
        for worker in workers:  # each ends after its current poll (a Polyaxon or Slack call at most)
            worker.join(timeout=timeout_s)
