"""At a promotion's quorum: the request claimed once, re-checked against the version as it stands, the stage
moved in Polyaxon and recorded (bot.release.ledger), then told once in the version's thread and the channel.
Polyaxon down, or a process that died mid-way, leaves the request for the watcher's next tick (bot.registry.quorum).
"""

from __future__ import annotations

from slack_sdk.errors import SlackApiError

from bot.registry.deps import RegistryDeps
from bot.registry.quorum import QuorumClaims
from bot.registry.states import RequestStates
from bot.release.ledger import StageLedger
from bot.release.requests import PromotionRequests, label
from storage import repos
from storage.models import ApprovalRequest, Run

PROMOTED_EVENT = "finetune_promoted"  # message metadata of the stage-change post


class StageMover:
    """Moves the stage of approved promotion requests, exactly once, and tells the thread."""

    def __init__(
        self, deps: RegistryDeps, states: RequestStates, requests: PromotionRequests, ledger: StageLedger
    ) -> None:
        self.deps = deps
        self.states = states
        self.requests = requests
        self.ledger = ledger
        self.claims = QuorumClaims(deps, in_flight="promoting", done="promoted")

    def maybe_apply(self, request_id: int) -> None:
        """An approval counted: at quorum, claim the request once and move the stage."""
        if self.claims.reached(request_id):
            self.apply(request_id)

    def apply(self, request_id: int) -> bool:
        """Move the stage of an approved request (claimed here); True when moved now."""
        from bot.polyaxon import GatewayError

        if not self.claims.start(request_id):
            return False
        with self.deps.runs.sessions() as s:
            request = repos.get_approval_request(s, request_id=request_id)
            run = repos.get_run(s, run_id=request.run_id) if request is not None else None
            approvers = [a.user for a in repos.active_approvals(s, request_id=request_id)]
        if request is None or run is None:
            return False
        registration, check = self.requests.subject(request)
        fresh = self.requests.fresh_digest(request, run)
        if fresh is None:
            return self.pending(request, run, GatewayError("Polyaxon did not answer when the version was re-read"))
        if registration is None or fresh != request.candidate_digest:
            self.states.void(request, run, new_digest=fresh, from_statuses=("promoting",))
            return False
        try:
            self.ledger.move(
                registration,
                to_stage=request.stage or "",
                kind="promote",
                actor=request.requester,
                approvers=approvers,
                request=request,
                check=check,
            )
        except GatewayError as exc:
            return self.pending(request, run, exc)
        self.record(request_id)
        return True

    def pending(self, request: ApprovalRequest, run: Run, exc: Exception) -> bool:
        """Polyaxon did not take the stage: the request stays approved, retried every tick; said once."""
        return self.claims.leave_approved(
            request,
            run,
            exc,
            command=f"promote approval request {request.id}",
            told=lambda reason: (
                f":hourglass_flowing_sand: Quorum reached for {label(request)}, but Polyaxon did not "
                f"take the stage: {reason}"
            ),
        )

    def record(self, request_id: int, *, recovering: bool = False) -> None:
        """After the stage change is committed: the recorded reaction and one post, in the thread and the channel."""
        with self.deps.runs.sessions() as s:
            request = repos.get_approval_request(s, request_id=request_id)
            run = repos.get_run(s, run_id=request.run_id) if request is not None else None
            change = repos.stage_change_for_request(s, request_id=request_id)
        if request is None or run is None or change is None:
            return
        try:
            self.deps.runs.client.reactions_add(
                channel=request.channel, timestamp=request.message_ts or "", name="rocket"
            )
        except SlackApiError as exc:
            if exc.response.get("error") != "already_reacted":
                raise
        if not recovering or self.deps.runs.thread.find_thread_post(run, PROMOTED_EVENT, request_id=request_id) is None:
            self.deps.runs.thread.post_thread(
                run,
                self.ledger.told(change),
                purpose="promoted",
                broadcast=True,
                metadata={"event_type": PROMOTED_EVENT, "event_payload": {"request_id": request_id}},
            )
        with self.deps.runs.sessions() as s:
            fresh = repos.get_approval_request(s, request_id=request_id)
            if fresh is not None:
                repos.update_approval_request(s, fresh, recorded_at=self.deps.runs.clock())
        self.states.ended(request)

    def retry_pending(self) -> int:
        """Promotions left approved (Polyaxon was down) or claimed by a process that died; how many moved now."""
        with self.deps.runs.sessions() as s:
            work = self.claims.work(repos.promotion_work(s))
        done = sum(self.apply(request_id) for request_id in work.carry_out)
        for request_id in work.tell:
            self.record(request_id, recovering=True)
        return done
