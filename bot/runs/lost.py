"""Runs Polyaxon no longer has (deleted in its UI, the server redeployed on an empty store, the bot pointed at another
server): recorded `lost` once, on the card and in the thread, and what a command answers about one.

The gateway says so with `RunGoneError` (a 404 for the run, or a deletion in progress); whoever meets it first (a
command, the watcher, a gate) records it here, and every later reader sees `lost` in the database.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from bot.runs.deps import RunDeps
from bot.runs.thread import RunThread
from bot.slack.blocks import escape, mention
from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from bot.polyaxon import RunGoneError

log = logging.getLogger(__name__)

LOST = repos.LOST_STATUS


def gone_text(name: str, host: str) -> str:
    """What a command answers about a run Polyaxon no longer has."""
    return f"`{escape(name)}` is no longer in Polyaxon at {escape(host)}: deleted there, or the server was replaced"


def lost_reply(name: str, host: str) -> str:
    """The whole reply: what happened, what it means for the run's card and for what builds on the run."""
    return (
        f":ghost: {gone_text(name, host)}. Its card now says *lost*: what the bot recorded (card, thread, metrics) "
        "stays, but nothing more can be read from the run, resumed from it, registered or compared, and no gate "
        "counts it as evidence. Start it again with `/finetune run …`."
    )


class LostRuns:
    """Records runs Polyaxon no longer has as `lost` (once each) and checks evidence against Polyaxon."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread

    def record(self, gone: RunGoneError) -> Run | None:
        """The bot's run Polyaxon said is gone, recorded lost; None when the bot has no run of that uuid."""
        with self.deps.sessions() as s:
            run = next((r for r in repos.find_runs(s, ref=gone.uuid) if r.polyaxon_uuid == gone.uuid), None)
        return self.mark(run, host=gone.host) if run is not None else None

    def mark(self, run: Run, *, host: str) -> Run:
        """Record the run lost and tell it once in its thread (the card follows); a lost run is left as it is."""
        if run.status == LOST:
            return run
        log.warning("run %s (%s) is no longer in Polyaxon at %s: recorded lost", run.name, run.polyaxon_uuid, host)
        # What waited on the run closes first (an approval request for it is voided: what it approved is gone), so
        # that the one lost post says all of it.
        closed = [said for hook in self.deps.on_lost if (said := hook(run))]
        return self.thread.transition(
            run,
            status=LOST,
            message=f"no longer in Polyaxon at {host}",
            text=" ".join(
                [
                    f":ghost: *Lost*: {gone_text(run.name, host)}. The bot no longer asks Polyaxon about it; what it "
                    f"recorded stays here, and no gate counts this run as evidence.",
                    *closed,
                    mention(run.requester),
                ]
            ),
        )

    def still_there(self, run: Run) -> bool:
        """Whether Polyaxon still has the run (one request); one it no longer has is recorded lost.

        Unreachable counts as there: whatever the caller goes on to do needs Polyaxon, and fails on its own then.
        """
        from bot.polyaxon import GatewayError, RunGoneError

        if run.status == LOST:
            return False
        if not run.polyaxon_uuid:
            return True
        try:
            self.deps.gateway.get_run(run.polyaxon_uuid, with_conditions=False)
        except RunGoneError as gone:
            self.mark(run, host=gone.host)
            return False
        except GatewayError as exc:
            log.warning("could not check that Polyaxon still has %s: %s", run.name, exc)
        return True
