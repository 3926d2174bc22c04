"""The life of an approval request after it is made: reopened, expired or voided — once, whoever gets there first.

Each change is one conditional UPDATE of the request row (a claim), so concurrent reactions, the watcher and
a re-issued command can race and exactly one of them tells the thread.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

from bot.registry.deps import RegistryDeps
from bot.slack.blocks import escape
from storage import repos
from storage.models import ApprovalRequest, Run

# The background pass that closes expired requests (bot.background): one item per request.
EXPIRY = "approval_expiry"


class RequestStates:
    """Moves approval requests between open, approved, expired and voided, and says so in the run's thread."""

    def __init__(self, deps: RegistryDeps) -> None:
        self.deps = deps
        # Called once a request reached a final state (expired, voided, or carried out: `ended`), by whoever got it
        # there; a Workflow Builder step waiting on it completes (bot.steps, wired by the composition root).
        self.on_ended: list[Callable[[ApprovalRequest], None]] = []

    def ended(self, request: ApprovalRequest) -> None:
        """Tell what waits on a request that it reached a final state (each hook claims its own work once)."""
        for hook in self.on_ended:
            hook(request)

    def label(self, request: ApprovalRequest) -> str:
        """How texts name the request's subject."""
        hooks = self.deps.action(request.action)
        return hooks.label(request) if hooks is not None else f"`{escape(request.model)}`"

    def changed(self, request: ApprovalRequest) -> str:
        """What changed, for the voided message."""
        hooks = self.deps.action(request.action)
        return hooks.changed if hooks is not None else "its subject changed after it was made"

    def reissue(self, request: ApprovalRequest, run: Run) -> str:
        """The command that asks for the same approval again."""
        hooks = self.deps.action(request.action)
        return hooks.reissue(request, run) if hooks is not None else "/finetune help"

    def reopen(self, request: ApprovalRequest) -> bool:
        """Approved but not yet registering -> open again; False once a registration attempt has claimed it."""
        with self.deps.runs.sessions() as s:
            return repos.claim_approval_request(
                s, request_id=request.id or 0, from_statuses=["approved"], to_status="open", decided_at=None
            )

    def expire(self, request: ApprovalRequest, run: Run) -> bool:
        """Close an open request past its expiry; whoever closes it (sweep, reaction, re-issue) says so, once."""
        count = 0
        with self.deps.runs.sessions() as s:
            closed = repos.claim_approval_request(
                s,
                request_id=request.id or 0,
                from_statuses=["open"],
                to_status="expired",
                decided_at=self.deps.runs.clock(),
            )
            if closed:
                count = len(repos.active_approvals(s, request_id=request.id or 0))
        if closed:
            self.deps.runs.thread.post_thread(
                run,
                f":hourglass: The approval request for {self.label(request)} expired unapproved "
                f"({count}/{request.quorum} approvals). To ask again: `{escape(self.reissue(request, run))}`.",
                purpose="approval_expired",
            )
            hooks = self.deps.action(request.action)
            if hooks is not None and hooks.on_expired is not None:
                hooks.on_expired(request, run)
            self.ended(request)
        return closed

    def expire_due(self) -> int:
        """Close every open request past its expiry (a watcher tick); how many were closed now."""
        now = self.deps.runs.clock()
        with self.deps.runs.sessions() as s:
            due = [
                (request, repos.get_run(s, run_id=request.run_id))
                for request in repos.list_approval_requests(s, statuses=["open"], expires_by=now)
            ]
        # Each request on its own: one whose thread cannot be posted to is backed off and parked, not in the way.
        batch = self.deps.runs.deps.items.batch(EXPIRY, [str(request.id) for request, _ in due])
        return sum(
            bool(batch.attempt(str(request.id), partial(self.expire, request, run), run_id=run.id).value)
            for request, run in due
            if run is not None
        )

    def void(
        self, request: ApprovalRequest, run: Run, *, new_digest: str, from_statuses: tuple[str, ...] = ("open",)
    ) -> None:
        """The subject changed: the request and every approval on it no longer count."""
        digests = f"{request.candidate_digest[:12]} -> {new_digest[:12]}"
        self.void_request(
            request,
            run,
            from_statuses=from_statuses,
            error=f"candidate changed: {digests}",
            audit=f"candidate digest {digests}",
            told=f":no_entry: The approval request for {self.label(request)} is *voided*: {self.changed(request)} "
            f"(digest `{request.candidate_digest[:12]}` → `{new_digest[:12]}`). "
            f"Its approvals no longer count; re-issue `{escape(self.reissue(request, run))}`.",
        )

    def void_cancelled(self, run: Run, user: str) -> str | None:
        """A held run was cancelled before it reached Polyaxon: void its open requests now, saying nothing in the
        thread (the cancellation's one message says it); that sentence, or None when nothing was open."""
        return self._void_waiting(
            run,
            statuses=("open",),
            error=f"its run was cancelled by {user}",
            audit=f"{run.name} cancelled by {user} before it reached Polyaxon",
            why="nothing is left to approve; approvals on it no longer count",
        )

    def void_lost(self, run: Run) -> str | None:
        """The run is no longer in Polyaxon: its open or approved requests are voided now, saying nothing in the
        thread (the lost post says it); that sentence, or None when nothing was waiting."""
        return self._void_waiting(
            run,
            statuses=("open", "approved"),
            error="its run is no longer in Polyaxon",
            audit=f"{run.name} is no longer in Polyaxon",
            why="what it asked to approve is gone",
        )

    def _void_waiting(self, run: Run, *, statuses: tuple[str, ...], error: str, audit: str, why: str) -> str | None:
        """Void every request of the run in `statuses` (each once); the sentence that says so, or None."""
        with self.deps.runs.sessions() as s:
            waiting = list(repos.list_approval_requests(s, statuses=list(statuses), run_id=run.id))
        voided = [
            request
            for request in waiting
            if self.void_request(request, run, from_statuses=statuses, error=error, audit=audit, told=None)
        ]
        if not voided:
            return None
        labels = ", ".join(self.label(request) for request in voided)
        noun = "request is" if len(voided) == 1 else "requests are"
        return f"Its approval {noun} voided ({labels}): {why}."

    def void_request(
        self,
        request: ApprovalRequest,
        run: Run,
        *,
        from_statuses: tuple[str, ...],
        error: str,
        audit: str,
        told: str | None,
    ) -> bool:
        """Move the request to `voided` (once, whoever gets there first), audit it, and tell the thread (`told`;
        None when the caller says it in its own message)."""
        with self.deps.runs.sessions() as s:
            voided = repos.claim_approval_request(
                s,
                request_id=request.id or 0,
                from_statuses=list(from_statuses),
                to_status="voided",
                decided_at=self.deps.runs.clock(),
                error=error,
            )
            if voided:
                repos.add_audit(
                    s,
                    user=request.requester,
                    channel=request.channel,
                    command=f"void approval request {request.id}",
                    outcome="ok",
                    detail=audit,
                    run_id=run.id,
                )
        if voided and told is not None:
            self.deps.runs.thread.post_thread(run, told, purpose="approval_voided")
        if voided:
            self.ended(request)
        return voided
