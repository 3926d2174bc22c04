"""Held runs: a run recorded and carded but not submitted until approvers approve its request.

A preflight skip and a run over the channel's budget are both held this way, with registration's rules (one
request in the run's thread, approvers other than the requester approve by reaction up to the quorum, a removed
reaction withdraws, expiry cancels the held run, a held run that changed voids the request, all audited). What
differs is the request's text, what the run is marked with when released, and the command that asks again.
"""

from __future__ import annotations

import hashlib
import json
from functools import partial
from typing import TYPE_CHECKING, Any

from bot.grammar import RunCommand
from bot.registry.deps import RegistryDeps
from bot.runs import Reply
from bot.slack.blocks import context, escape, header, mention, section
from storage import repos
from storage.models import ApprovalRequest, Run

if TYPE_CHECKING:
    from bot.catalog import Plan

HELD = "awaiting_approval"


def held_digest(run: Run) -> str:
    """What approving a held run is for: its compiled operation and its gate (voided if either changes)."""
    payload = {"operation": run.pending_operation, "gate": (run.validation or {}).get("gate_key"), "status": run.status}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def run_command(run: Run, flag: str = "") -> str:
    """The `run` command that asks for the same run again."""
    parts = [f"/finetune run recipe={run.recipe_name}"]
    if run.presets:
        parts.append("preset=" + ",".join(run.presets))
    parts += [f"{k}={v}" for k, v in run.overrides.items()]
    return " ".join([*parts, flag] if flag else parts)


class HeldRuns:
    """Holds runs of one approval action until approvers let them be submitted. Subclasses say the words."""

    action = ""
    label_prefix = ""

    def __init__(self, deps: RegistryDeps) -> None:
        self.deps = deps

    # What differs per action ---------------------------------------------------------------------------

    def request_text(self, run: Run, *, user: str, detail: str) -> tuple[str, str]:
        """(header, body) of the approval request."""
        raise NotImplementedError

    def released_validation(self, run: Run, request: ApprovalRequest, approvers: list[str]) -> dict[str, Any] | None:
        """What the released run is marked with (None: leave its validation as it is)."""
        return run.validation

    def released_text(self, run: Run, who: str) -> str:
        """The thread post when approvers release it."""
        raise NotImplementedError

    def expired_text(self, run: Run) -> str:
        """The thread post when the request expired unapproved."""
        raise NotImplementedError

    def reissue(self, run: Run) -> str:
        """The command that asks again."""
        return run_command(run)

    # The machinery ------------------------------------------------------------------------------------

    def post_request(self, run: Run, *, user: str, detail: str, audit: str) -> None:
        """Post the approval request in the held run's thread (sent to the channel) and record it."""
        runs, deps = self.deps.runs, self.deps
        expires_at = runs.clock() + deps.ttl
        title, body = self.request_text(run, user=user, detail=detail)
        blocks = [
            header(title),
            section(body),
            context(
                f"{deps.quorum} approval(s) with :{deps.reaction}: on this message, from approvers other than "
                f"{mention(user)}, submit it · removing a reaction before then withdraws it · expires "
                f"{expires_at:%Y-%m-%d %H:%M} UTC, which cancels the run"
            ),
        ]
        # The title is the header (plain text) and the notification text (mrkdwn): escaped for the latter.
        ts = runs.thread.post_thread(run, escape(title), purpose="approval_request", blocks=blocks, broadcast=True)
        with runs.sessions() as s:
            request = repos.create_approval_request(
                s,
                run_id=run.id,
                action=self.action,
                model=f"{self.label_prefix}:{run.recipe_name}",
                requester=user,
                channel=run.channel,
                message_ts=ts,
                thread_ts=run.thread_ts or ts,
                candidate_digest=held_digest(run),
                criteria=[],
                status="open",
                expires_at=expires_at,
                quorum=deps.quorum,
            )
            repos.add_audit(
                s,
                user=user,
                channel=run.channel,
                command=audit,
                outcome="ok",
                detail=f"approval request {request.id}: held until {deps.quorum} approval(s)",
                run_id=run.id,
            )

    def hold(
        self, plan: Plan, cmd: RunCommand, *, user: str, channel: str, delivery_key: str, forced: bool
    ) -> tuple[Reply, Run | None]:
        """Record and card the run as held; the run still waiting for its request, or None with the reply when
        there is nothing to ask (the same delivery again, whose request was posted, or a run no longer held)."""
        submitter = self.deps.runs.submitter
        reply, run = submitter.start_command(
            plan, cmd, user=user, channel=channel, delivery_key=delivery_key, forced=forced, hold=True
        )
        if run is None:  # the same delivery again: post the request a crash may have kept it from posting
            run = submitter.existing(plan, delivery_key)
            if run is None or self.asked(run) or run.status != HELD:
                return reply, None
        return reply, run

    def asked(self, run: Run) -> bool:
        """Whether the held run has its request already (a delivery carried out again after a crash)."""
        with self.deps.runs.sessions() as s:
            return bool(repos.list_approval_requests(s, run_id=run.id, action=self.action))

    def release(self, request_id: int) -> None:
        """At quorum: claim the request once, then submit the held run (called for every approval)."""
        runs = self.deps.runs
        with runs.sessions() as s:
            request = repos.get_approval_request(s, request_id=request_id)
            count = len(repos.active_approvals(s, request_id=request_id))
        if request is None or count < request.quorum:
            return
        with runs.sessions() as s:
            won = repos.claim_approval_request(
                s, request_id=request_id, from_statuses=["open"], to_status="granted", decided_at=runs.clock()
            )
        if won:
            self.submit_held(request_id)

    def submit_held(self, request_id: int) -> bool:
        """Submit the held run of a granted request (again after a crash: the run's own claim makes it once)."""
        runs = self.deps.runs
        with runs.sessions() as s:
            request = repos.get_approval_request(s, request_id=request_id)
            run = repos.get_run(s, run_id=request.run_id) if request is not None else None
            approvers = [a.user for a in repos.active_approvals(s, request_id=request_id)]
            if request is None or run is None or run.status != HELD or run.pending_operation is None:
                return False
            validation = self.released_validation(run, request, approvers)
            if not repos.claim_held_run(s, run_id=run.id or 0, from_status=HELD, validation=validation or {}):
                return False
            repos.add_audit(
                s,
                user=request.requester,
                channel=request.channel,
                command=f"{self.action.replace('_', ' ')} of {run.name}",
                outcome="ok",
                detail=f"approval request {request_id}: approved by {', '.join(approvers)}",
                run_id=run.id,
            )
            run = repos.get_run(s, run_id=run.id or 0) or run
        who = ", ".join(mention(a) for a in approvers)
        runs.thread.post_thread(run, self.released_text(run, who), purpose="approval")
        operation: dict[str, Any] = dict(run.pending_operation or {})
        runs.submitter.submit_to_polyaxon(run, operation.get("operation") or {}, operation.get("tags") or [])
        return True

    def retry_pending(self) -> int:
        """Held runs whose request was granted by a process that died before submitting them; how many now."""
        with self.deps.runs.sessions() as s:
            granted = repos.list_approval_requests(s, statuses=["granted"], action=self.action)
            ids = [r.id or 0 for r in granted if (run := repos.get_run(s, run_id=r.run_id)) and run.status == HELD]
        # Each request on its own (bot.background): a held run whose thread cannot be posted to is parked.
        batch = self.deps.runs.deps.items.batch(f"held_{self.action}"[:32], [str(i) for i in ids])
        return sum(bool(batch.attempt(str(i), partial(self.submit_held, i)).value) for i in ids)

    def expired(self, request: ApprovalRequest, run: Run) -> None:
        """An expired request cancels its held run (once: only a held run moves)."""
        if run.status != HELD:
            return
        self.deps.runs.thread.transition(
            run,
            status="skipped",
            message=f"the {self.action.replace('_', ' ')} request expired unapproved",
            text=self.expired_text(run),
            pending_operation=None,
        )


def escape_command(command: str) -> str:
    """A command quoted in a message."""
    return f"`{escape(command)}`"
