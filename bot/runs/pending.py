"""Pending submissions, retried each watcher tick, one run at a time: a run whose card cannot be posted (its
channel is gone, or the bot is not in it) is backed off and at last given up, never in the way of the others."""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING

from bot.runs.parked import tell_parked, undeliverable
from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from bot.runs.submit import Submitter

# The background pass of pending submissions (bot.background): one item per run.
PENDING_SUBMIT = "pending_submit"


class PendingSubmissions:
    """One pass over the runs waiting to reach Polyaxon (or to get their card)."""

    def __init__(self, submitter: Submitter) -> None:
        self.submitter = submitter
        self.deps = submitter.deps
        self.thread = submitter.thread

    def retry(self) -> int:
        """Retry every pending submission that is due; how many went through."""
        from bot.runs.submit import STALE_SUBMISSION

        stale = self.deps.clock() - STALE_SUBMISSION
        with self.deps.sessions() as s:
            pending = [run for run in repos.pending_submissions(s, stale_before=stale) if run.pending_operation]
        batch = self.deps.items.batch(PENDING_SUBMIT, [str(run.id) for run in pending])
        done = 0
        for run in pending:
            tried = batch.attempt(
                str(run.id), partial(self.retry_one, run), run_id=run.id, tell=partial(self.give_up, run)
            )
            done += bool(tried.value)
        return done

    def retry_one(self, run: Run) -> bool:
        """Post the card a crash (or Slack) kept from being posted, then submit; whether Polyaxon took it."""
        op = run.pending_operation or {}
        if run.card_ts is None:
            self.thread.post_card(run)
        return self.submitter.submit_to_polyaxon(run, op["operation"], op.get("tags", []))

    def give_up(self, run: Run, error: str) -> None:
        """Retried to the limit: the run ends `submit_failed` (never submitted) and the requester hears why."""
        with self.deps.sessions() as s:
            fresh = self.thread.reload(s, run)
            repos.update_run(
                s,
                fresh,
                status="submit_failed",
                pending_operation=None,
                failure=undeliverable(error, run.channel) if fresh.card_ts is None else fresh.failure,
                finished_at=self.deps.clock(),
            )
            run = fresh
        tell_parked(self.deps, self.thread, run, what="submitting it", error=error)
