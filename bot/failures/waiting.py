"""Runs that have not started: each new reason to wait told once in the thread and on the card, and a run past its
start deadline stopped with why (bot.failures' room: the watcher hands it the waiting runs of each tick)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from bot.failures.classify import Failure
from bot.failures.cluster import informative
from bot.failures.render import deadline_text, failure_record, waiting_text
from bot.redact import redact
from bot.runs import RunThread
from bot.runs.deps import RunDeps
from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from bot.polyaxon import RemoteView, RunInfo

WAITING = frozenset(
    {"created", "compiled", "queued", "scheduled", "starting", "on_schedule", "unschedulable", "warning", "retrying"}
)
PENDING_MESSAGES = {
    "approval": "Polyaxon holds it until someone approves it there (the operation has isApproved: false)",
    "upload": "Polyaxon waits for its code or files to be uploaded",
    "build": "Polyaxon waits for its image build",
    "cache": "Polyaxon is checking its cache",
}


class WaitingRuns:
    """Tells why runs that have not started wait, and stops those past their start deadline."""

    def __init__(self, deps: RunDeps, thread: RunThread) -> None:
        self.deps = deps
        self.thread = thread

    def watch(self, runs: Sequence[Run], remote: RemoteView, now: datetime) -> int:
        """Waiting runs Polyaxon changed have their new status conditions told once; any waiting run past its start
        deadline is stopped. Returns the requests made (one per changed waiting run, one per stop)."""
        requests = 0
        for run in runs:
            if run.status not in WAITING or run.started_at is not None:
                continue
            uuid = run.polyaxon_uuid or ""
            info = remote.get(uuid)
            if info is None and not remote.unchanged(uuid):
                continue  # gone from a complete list: it ended, and the watcher reads how
            if info is not None:
                info.conditions = self.deps.gateway.run_conditions(uuid)
                requests += 1
                if info.status == run.status:
                    # Still waiting as recorded: a new reason is told here. A run whose status moved on (started,
                    # failed, another waiting status) is told by its transition, with its reason, once.
                    run = self._tell_condition(run, info)
            requests += self._enforce_deadline(run, info, now)
        return requests

    def _tell_condition(self, run: Run, info: RunInfo) -> Run:
        told = waiting_reason(info)
        if told is None:
            return run
        reason, message = told
        key = condition_key(reason, message)
        if key == run.condition:
            return run
        with self.deps.sessions() as s:
            fresh = repos.get_run(s, run_id=run.id or 0)
            if fresh is None or fresh.condition == key:
                return fresh or run
            fresh = repos.update_run(s, fresh, condition=key)
        message = redact(message or "", extra_secrets=self.deps.secrets) or None
        self.thread.post_thread(fresh, waiting_text(reason, message, info.status), purpose="condition")
        self.thread.update_card(fresh, force=True)
        return fresh

    def _enforce_deadline(self, run: Run, info: RunInfo | None, now: datetime) -> int:
        """Stop a run still waiting past its deadline (`info` None: Polyaxon did not change it, so it still waits)."""
        limit = (run.policy or {}).get("max_pending_s")
        if not limit or run.failure is not None:
            return 0
        if info is not None and (info.started_at is not None or info.is_done):
            return 0
        waited = (now - run.created_at).total_seconds()
        if waited < float(limit):
            return 0
        origin = str((run.policy or {}).get("max_pending_from") or "recipe")
        status = info.status if info is not None else run.status
        record = failure_record(
            Failure("start_deadline", f"still {status} after {waited:.0f} s (deadline {float(limit):g} s, {origin})"),
            hint_text="Try another preset, or ask the platform team why the queue holds it.",
            retry="no",
            why="Not retried: it never started.",
        )
        with self.deps.sessions() as s:
            fresh = repos.get_run(s, run_id=run.id or 0)
            if fresh is None or fresh.failure is not None:
                return 0
            fresh = repos.update_run(s, fresh, failure=record)
        self.deps.gateway.stop(run.polyaxon_uuid or "")
        self.thread.post_thread(
            fresh, deadline_text(waited, float(limit), origin, fresh.condition), purpose="start_deadline"
        )
        return 1


def waiting_reason(info: RunInfo) -> tuple[str | None, str | None] | None:
    """Why a run that has not started waits now, as (reason, message): Polyaxon's hold before any queue, else its
    newest condition when that says something (a routine step, `OperatorController: Operation is starting`, does
    not); None when nothing does."""
    if info.pending:
        return f"Pending {info.pending}", PENDING_MESSAGES.get(info.pending, "held by Polyaxon")
    newest = info.conditions[-1] if info.conditions else None
    if newest is None or newest.type != info.status or not informative(newest.type, newest.reason, newest.message):
        return None
    return newest.reason, newest.message


def condition_key(reason: str | None, message: str | None) -> str:
    """What identifies a told condition (the same one is not told twice)."""
    return f"{reason or ''}: {message or ''}"[:512]
