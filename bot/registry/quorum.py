"""Carrying out an approved request exactly once, whatever it asks (register a version, move a stage).

At quorum one caller claims the request (`open` → `approved`), then claims it again to act (`approved` →
the action's in-flight status), acts, and commits. A failure of Polyaxon leaves it `approved` with the reason,
said once in the thread; the watcher's tick retries it, and takes over a claim older than `STALE_CLAIM` (its
process died mid-way) and a request carried out but never told.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import timedelta

from bot.registry.deps import RegistryDeps
from storage import repos
from storage.models import ApprovalRequest, Run

# A claim older than this belongs to a process that died mid-way: the next retry takes it over.
STALE_CLAIM = timedelta(minutes=5)


@dataclass
class Work:
    """What a watcher tick does for one action: requests to carry out, and carried-out ones to tell."""

    carry_out: list[int] = field(default_factory=list)
    tell: list[int] = field(default_factory=list)


class QuorumClaims:
    """The claims of one action: `in_flight` while it is carried out, `done` after."""

    def __init__(self, deps: RegistryDeps, *, in_flight: str, done: str) -> None:
        self.deps = deps
        self.in_flight = in_flight
        self.done = done

    def reached(self, request_id: int) -> bool:
        """At quorum, claim the open request as approved; True for the one caller that did."""
        with self.deps.runs.sessions() as s:
            request = repos.get_approval_request(s, request_id=request_id)
            count = len(repos.active_approvals(s, request_id=request_id))
        if request is None or count < request.quorum:
            return False
        with self.deps.runs.sessions() as s:
            return repos.claim_approval_request(
                s,
                request_id=request_id,
                from_statuses=["open"],
                to_status="approved",
                decided_at=self.deps.runs.clock(),
            )

    def start(self, request_id: int) -> bool:
        """Claim an approved request to carry it out now; False when another caller has it."""
        with self.deps.runs.sessions() as s:
            return repos.claim_approval_request(
                s,
                request_id=request_id,
                from_statuses=["approved"],
                to_status=self.in_flight,
                claimed_at=self.deps.runs.clock(),
            )

    def leave_approved(
        self, request: ApprovalRequest, run: Run, exc: Exception, *, command: str, told: Callable[[str], str]
    ) -> bool:
        """Carrying it out failed (Polyaxon down): back to approved with the reason, audited, told once; False."""
        reason = self.deps.redact(exc)
        with self.deps.runs.sessions() as s:
            repos.claim_approval_request(
                s,
                request_id=request.id or 0,
                from_statuses=[self.in_flight],
                to_status="approved",
                error=reason[:2000],
            )
            repos.add_audit(
                s,
                user=request.requester,
                channel=request.channel,
                command=command,
                outcome="error",
                detail=reason[:2000],
                run_id=run.id,
            )
        if self.deps.first_notice(request.id or 0, "bot", "pending"):
            self.deps.runs.thread.post_thread(
                run,
                told(reason)
                + "\nThe request stays *approved*, nothing is lost: the bot retries on every watcher tick.",
                purpose="approval_pending",
            )
        return False

    def work(self, requests: Sequence[ApprovalRequest]) -> Work:
        """Sort a tick's requests: approved ones and stale in-flight ones (reclaimed here) are carried out; done
        ones not yet told, once stale, are told (the caller's `record` reads the thread back first)."""
        now = self.deps.runs.clock()
        stale = [r for r in requests if r.claimed_at is None or now - r.claimed_at > STALE_CLAIM]
        todo = Work(
            carry_out=[r.id or 0 for r in requests if r.status == "approved"],
            tell=[r.id or 0 for r in stale if r.status == self.done],
        )
        with self.deps.runs.sessions() as s:
            for request in stale:
                if request.status == self.in_flight and repos.claim_approval_request(
                    s, request_id=request.id or 0, from_statuses=[self.in_flight], to_status="approved"
                ):
                    todo.carry_out.append(request.id or 0)
        return todo
