"""One follow of a run's log: a streamed message in its thread that each poll appends the new lines to."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.follow.render import (
    CONTINUED,
    REACHABLE,
    RESTARTED,
    UNREACHABLE,
    Ending,
    closing,
    heading,
    log_chunks,
    skipped_line,
)
from bot.polyaxon import GatewayError, RunGoneError
from bot.redact import redact
from bot.runs.deps import RunDeps
from bot.slack.streams import MessageStreams, StreamClosed, StreamError
from storage import repos
from storage.models import LogFollow, Run

log = logging.getLogger(__name__)

# How many of the log's lines a new follow shows before the new ones (`logs RUN lines=N` shows more).
FIRST_LINES = 20
# The gateway's tail reads the whole log; this only bounds what one poll keeps of a runaway one.
MAX_READ = 100_000
# Slack ends a stream about five minutes after its start: a follow goes on in a new message before that.
SEGMENT_FOR = timedelta(minutes=4)


@dataclass(frozen=True)
class FollowTiming:
    """How long a follow lasts, how long its holder's lease lasts between polls, and how often it polls."""

    follow_for: timedelta = timedelta(minutes=10)
    lease_ttl: timedelta = timedelta(seconds=60)
    poll_s: float = 3.0
    segment_for: timedelta = SEGMENT_FOR


class FollowLoop:
    """One follow this process holds: `open()` once, then `step()` each poll until it returns False.

    The row is the truth between polls: how many lines went out (`lines_sent`) and which message streams
    (`stream_ts`) are recorded with each lease renewal, so a replica that takes the follow over goes on from there.
    A renewal that matches nothing means another replica took the follow over: this loop then stops, silently.
    """

    def __init__(
        self, deps: RunDeps, streams: MessageStreams, follow: LogFollow, *, holder: str, timing: FollowTiming
    ) -> None:
        assert follow.id is not None
        self.deps = deps
        self.streams = streams
        self.follow = follow
        self.follow_id = follow.id
        self.holder = holder
        self.timing = timing
        self.run = self._load_run()
        self.stream_ts = follow.stream_ts
        self.segment_started = follow.segment_started_at
        self.lines_sent = follow.lines_sent
        self.unreachable = False
        self.done = False

    # --- the follow's life ------------------------------------------------------------------------------------

    def open(self, *, orphaned_ts: str | None = None) -> str | None:
        """Close what a dead holder left streaming, start this follow's message with its first lines; its ts.

        None when the follow ended at once (its ten minutes were over by the time it was taken over).
        """
        now = self.deps.clock()
        past_deadline = now >= self.follow.deadline
        if orphaned_ts is not None:
            closing_text = "\n" + self._closing(Ending.LIMIT) if past_deadline else RESTARTED
            self._stop_quietly(orphaned_ts, closing_text)
        if past_deadline:
            self._finish(Ending.LIMIT, now=now, stop_stream=False)
            return None
        self._start_segment(resumed=orphaned_ts is not None)
        self.step()
        return self.stream_ts

    def step(self) -> bool:
        """One poll: append the log's new lines, stop when the run ended or time is up; False when over."""
        if self.done:
            return False
        now = self.deps.clock()
        status = self._load_run().status  # read before the log: the lines read after it include the last ones
        last = status in repos.TERMINAL_STATUSES or now >= self.follow.deadline
        if not last and self.segment_started is not None and now - self.segment_started >= self.timing.segment_for:
            self._roll_over()
        if not self._append_new_lines():
            return False
        if status in repos.TERMINAL_STATUSES:
            self._finish(Ending.STOPPED if status == "stopped" else Ending.ENDED, now=now, status=status)
        elif now >= self.follow.deadline:
            self._finish(Ending.LIMIT, now=now)
        elif not self._renew(now):
            self.done = True
            log.info("log follow %s: taken over by another replica", self.follow_id)
        return not self.done

    def release(self) -> None:
        """A clean shutdown: hand the follow over at once (the stream stays open for whoever takes it)."""
        if not self.done:
            with self.deps.sessions() as s:
                repos.release_follow(s, follow_id=self.follow_id, holder=self.holder, now=self.deps.clock())
            self.done = True

    # --- the log ----------------------------------------------------------------------------------------------

    def _append_new_lines(self) -> bool:
        """Read the log and append what is new; False when the follow ended (the run gone, Slack refusing)."""
        assert self.run.polyaxon_uuid is not None
        try:
            tail = self.deps.gateway.tail_logs(self.run.polyaxon_uuid, lines=MAX_READ)
        except RunGoneError:
            self._finish(Ending.GONE, now=self.deps.clock())
            return False
        except GatewayError as exc:
            if not self.unreachable:  # said once per outage; the follow goes on polling
                log.warning("log follow %s: Polyaxon unreachable: %s", self.follow_id, exc)
                self.unreachable = True
                return self._append(UNREACHABLE)
            return True
        prefix = ""
        if self.unreachable:
            self.unreachable = False
            prefix = REACHABLE
        total = tail.total if tail.total is not None else len(tail.lines)
        if self.lines_sent is None or self.lines_sent > total:
            # A new follow starts with the last lines; a log that shrank (a resumed run's new log) starts over.
            skipped = max(0, total - FIRST_LINES)
            if self.lines_sent is None and skipped:
                prefix += skipped_line(skipped, self.run.name)
            self.lines_sent = skipped
        offset = total - len(tail.lines)  # lines before the first one this read returned
        fresh = tail.lines[max(0, self.lines_sent - offset) :]
        if prefix and not self._append(prefix):
            return False
        sent = self.lines_sent
        texts = [redact(line.value, extra_secrets=self.deps.secrets) for line in fresh]
        for chunk, count in log_chunks(texts):
            if not self._append(chunk):
                return False
            sent += count
            self.lines_sent = sent
        return True

    # --- Slack ------------------------------------------------------------------------------------------------

    def _append(self, markdown: str) -> bool:
        """Append to the stream, in a new message when Slack ended this one; False when Slack refuses."""
        assert self.stream_ts is not None
        try:
            self.streams.append(channel=self.follow.channel, ts=self.stream_ts, markdown=markdown)
            return True
        except StreamClosed:
            pass  # Slack ended the message (its lifetime, or someone stopped it in the client): go on in a new one
        except StreamError as exc:
            self._finish(Ending.REFUSED, now=self.deps.clock(), detail=exc.error)
            return False
        try:
            self._start_segment(resumed=True)
            self.streams.append(channel=self.follow.channel, ts=self.stream_ts, markdown=markdown)
            return True
        except StreamError as exc:
            self._finish(Ending.REFUSED, now=self.deps.clock(), detail=exc.error)
            return False

    def _start_segment(self, *, resumed: bool) -> None:
        self.stream_ts = self.streams.start(
            channel=self.follow.channel,
            thread_ts=self.follow.thread_ts,
            recipient=self.follow.requester,
            markdown=heading(self.run.name, resumed=resumed, minutes=self._minutes()),
        )
        self.segment_started = self.deps.clock()
        self._renew(self.segment_started)

    def _roll_over(self) -> None:
        assert self.stream_ts is not None
        self._stop_quietly(self.stream_ts, CONTINUED)
        self._start_segment(resumed=True)

    def _stop_quietly(self, ts: str, markdown: str) -> None:
        try:
            self.streams.stop(channel=self.follow.channel, ts=ts, markdown=markdown)
        except StreamError as exc:  # already ended (Slack's lifetime): its text stays as it was
            log.info("log follow %s: stopping %s: %s", self.follow_id, ts, exc.error)

    def _finish(
        self,
        ending: Ending,
        *,
        now: datetime,
        status: str | None = None,
        detail: str | None = None,
        stop_stream: bool = True,
    ) -> None:
        text = self._closing(ending, status=status, detail=detail)
        if stop_stream and self.stream_ts is not None:
            self._stop_quietly(self.stream_ts, "\n" + text)
        with self.deps.sessions() as s:
            repos.stop_follow(
                s, follow_id=self.follow_id, holder=self.holder, now=now, reason=text, lines_sent=self.lines_sent
            )
        self.done = True

    def _closing(self, ending: Ending, *, status: str | None = None, detail: str | None = None) -> str:
        return closing(ending, run_name=self.run.name, status=status, detail=detail)

    # --- the row ----------------------------------------------------------------------------------------------

    def _renew(self, now: datetime) -> bool:
        with self.deps.sessions() as s:
            return repos.renew_follow(
                s,
                follow_id=self.follow_id,
                holder=self.holder,
                now=now,
                ttl=self.timing.lease_ttl,
                lines_sent=self.lines_sent,
                stream_ts=self.stream_ts,
                segment_started_at=self.segment_started,
            )

    def _load_run(self) -> Run:
        with self.deps.sessions() as s:
            run = repos.get_run(s, run_id=self.follow.run_id)
        assert run is not None
        return run

    def _minutes(self) -> int:
        return round(self.timing.follow_for.total_seconds() / 60)
