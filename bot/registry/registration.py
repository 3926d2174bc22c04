"""Registration, exactly once: at quorum the request row is claimed, the model version is created in Polyaxon,
the bot's registration row is committed, and only then does the thread say so. Polyaxon down or a process that
died mid-way leaves the request for the watcher's next tick; nothing is lost and nothing happens twice.
"""

from __future__ import annotations

import logging
from functools import partial

from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import IntegrityError

from bot.registry.candidate import read_candidate
from bot.registry.deps import RegistryDeps
from bot.registry.policy import CriterionResult
from bot.registry.quorum import QuorumClaims
from bot.registry.render import next_version, polyaxon_version_name
from bot.registry.states import RequestStates
from bot.slack.blocks import escape, mention
from storage import repos
from storage.models import ApprovalRequest, Run

log = logging.getLogger(__name__)

RECORDED_REACTION = "floppy_disk"
REGISTERED_EVENT = "finetune_registered"  # message metadata of the registration summary
# The background passes of registration (bot.background): one item per approval request.
REGISTRATION = "registration"
REGISTERED_TOLD = "registration_told"


class Registrar:
    """Registers approved requests in Polyaxon's model registry and tells the run's thread, once."""

    def __init__(self, deps: RegistryDeps, states: RequestStates) -> None:
        self.deps = deps
        self.states = states
        self.claims = QuorumClaims(deps, in_flight="registering", done="registered")

    def maybe_register(self, request_id: int) -> None:
        """An approval counted: at quorum, claim the request once and register."""
        if self.claims.reached(request_id):
            self.register(request_id)

    def register(self, request_id: int) -> bool:
        """Register an approved request (the caller holds no claim; this takes it); True when registered now."""
        from bot.polyaxon import GatewayError

        if not self.claims.start(request_id):
            return False
        with self.deps.runs.sessions() as s:
            request = repos.get_approval_request(s, request_id=request_id)
            run = repos.get_run(s, run_id=request.run_id) if request is not None else None
            approvals = list(repos.active_approvals(s, request_id=request_id))
            taken = {r.version for r in repos.list_registrations(s, model=request.model)} if request else set()
        if request is None or run is None:
            return False
        try:
            candidate, names = read_candidate(self.deps, run)
        except GatewayError as exc:
            return self.pending(request, run, exc)
        if candidate.digest() != request.candidate_digest:
            self.states.void(request, run, new_digest=candidate.digest(), from_statuses=("registering",))
            return False
        if request.version is not None and request.version in taken:
            return self.version_taken(request, run)
        version = request.version or next_version(taken)
        name = polyaxon_version_name(request.model, version)
        content = {
            "model": request.model,
            "version": version,
            "approval_request": request.id,
            "candidate": candidate.model_dump(),
            "candidate_digest": request.candidate_digest,
            "criteria_version": request.criteria_version,
            "criteria": request.criteria,
            "approvers": [a.user for a in approvals],
            "requester": request.requester,
        }
        try:
            model_version = self.deps.gateway.register_model_version(
                name,
                run_uuid=run.polyaxon_uuid or "",
                artifacts=names,
                description=f"{request.model}:{version} from {run.name}, approved by "
                + ", ".join(a.user for a in approvals),
                tags=["finetune-bot", request.model],
                content=content,
            )
        except GatewayError as exc:
            return self.pending(request, run, exc)
        try:
            with self.deps.runs.sessions() as s:
                registration = repos.create_registration(
                    s,
                    request_id=request_id,
                    model=request.model,
                    version=version,
                    run_id=run.id,
                    artifacts=names,
                    polyaxon_version=model_version.name,
                )
                fresh = repos.get_approval_request(s, request_id=request_id)
                if fresh is not None:
                    repos.update_approval_request(
                        s, fresh, status="registered", version=version, decided_at=self.deps.runs.clock(), error=None
                    )
                registration_id = registration.id
        except (repos.DuplicateError, IntegrityError) as exc:
            return self.pending(request, run, exc)
        log.info(
            "registry: %s:%s registered from %s (registration %s)", request.model, version, run.name, registration_id
        )
        # Committed: only now does the message say so.
        self.record(request_id)
        return True

    def version_taken(self, request: ApprovalRequest, run: Run) -> bool:
        """The version asked for was registered by another request meanwhile: retrying can't help, so void."""
        label = f"{request.model}:{request.version}"
        self.states.void_request(
            request,
            run,
            from_statuses=("registering",),
            error=f"{label} was registered by another request",
            audit=f"{label} taken by another request",
            told=f":no_entry: The approval request for `{escape(label)}` is *voided*: that version was registered "
            f"by another request after this one was made. Re-issue with another version: "
            f"`/finetune register {escape(run.name)} model={escape(request.model)} version=…` "
            "(or leave `version=` out).",
        )
        return False

    def pending(self, request: ApprovalRequest, run: Run, exc: Exception) -> bool:
        """Registration failed (Polyaxon down, version taken): the request stays approved, retried every tick."""
        return self.claims.leave_approved(
            request,
            run,
            exc,
            command=f"register approval request {request.id}",
            told=lambda reason: (
                f":hourglass_flowing_sand: Quorum reached for `{escape(request.model)}`, "
                f"but registering failed: {reason}"
            ),
        )

    def record(self, request_id: int, *, recovering: bool = False) -> None:
        """After the registration is committed: the bot's recorded reaction and the summary in the thread.

        `recovering`: an earlier process may have died after posting the summary and before noting it, so
        the thread is read back first (the summary carries the request id in its message metadata).
        """
        with self.deps.runs.sessions() as s:
            request = repos.get_approval_request(s, request_id=request_id)
            if request is None:
                return
            run = repos.get_run(s, run_id=request.run_id)
            registration = repos.registration_for_request(s, request_id=request_id)
            approvals = list(repos.active_approvals(s, request_id=request_id))
        if run is None or registration is None:
            return
        try:
            self.deps.runs.client.reactions_add(
                channel=request.channel, timestamp=request.message_ts or "", name=RECORDED_REACTION
            )
        except SlackApiError as exc:
            if exc.response.get("error") != "already_reacted":
                raise
        approver_lines = []
        for approval in approvals:
            link = self.deps.runs.thread.permalink(request.channel, approval.message_ts)
            emoji = f":{escape(approval.reaction)}:"
            where = f"<{link}|{emoji} on the request>" if link else emoji
            approver_lines.append(f"{mention(approval.user)} ({where}, {approval.approved_at:%Y-%m-%d %H:%M} UTC)")
        results = [CriterionResult.model_validate(c) for c in request.criteria]
        passed = sum(r.passed for r in results)
        lines = "\n".join(f"{':white_check_mark:' if r.passed else ':x:'} {escape(r.name)}" for r in results)
        text = (
            f":{RECORDED_REACTION}: Registered *{escape(request.model)}:{escape(registration.version)}* "
            f"(Polyaxon model version `{escape(str(registration.polyaxon_version))}`) from `{escape(run.name)}`.\n"
            f"Approved by {', '.join(approver_lines)}.\n"
            f"Criteria ({escape(str(request.criteria_version))}): {passed}/{len(results)} pass\n{lines}\n"
            f"`/finetune trace {escape(request.model)}:{escape(registration.version)}` shows the whole chain."
        )
        if (
            not recovering
            or self.deps.runs.thread.find_thread_post(run, REGISTERED_EVENT, request_id=request_id) is None
        ):
            self.deps.runs.thread.post_thread(
                run,
                text,
                purpose="registered",
                metadata={"event_type": REGISTERED_EVENT, "event_payload": {"request_id": request_id}},
            )
        with self.deps.runs.sessions() as s:
            fresh = repos.get_approval_request(s, request_id=request_id)
            if fresh is not None:
                repos.update_approval_request(s, fresh, recorded_at=self.deps.runs.clock())

    def retry_pending(self) -> int:
        """Register requests left approved (Polyaxon was down) or claimed by a process that died; how many now."""
        with self.deps.runs.sessions() as s:
            work = self.claims.work(repos.registration_work(s))
        # Each request on its own (bot.background): one that keeps failing is backed off and parked, not in the way.
        items = self.deps.runs.deps.items
        registering = items.batch(REGISTRATION, [str(i) for i in work.carry_out])
        done = sum(bool(registering.attempt(str(i), partial(self.register, i)).value) for i in work.carry_out)
        telling = items.batch(REGISTERED_TOLD, [str(i) for i in work.tell])
        for request_id in work.tell:
            telling.attempt(str(request_id), partial(self.record, request_id, recovering=True))
        return done
