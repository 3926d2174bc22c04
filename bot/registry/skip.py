"""Skipping a preflight is an approval like registration: the same request, reactions, quorum, expiry and audit.

`run … --skip-preflight` (an approver's, as only approvers may ask) does not submit: the run is recorded and
carded as `awaiting_approval`, holding its compiled operation, and an approval request (action
`skip_preflight`) is posted in its thread and sent to the channel. Other approvers — never the requester —
approve with the approval reaction; at quorum the run is submitted, shown *unvalidated* with who approved.
A removed reaction before quorum revokes; an expired request cancels the held run; a held run that was
stopped voids its request. A preflight that passes meanwhile does not release it: the request stands for
what it asked.
"""

from __future__ import annotations

import hashlib
import json
import logging
from typing import Any

from bot.grammar import RunCommand
from bot.registry.deps import RegistryDeps
from bot.runs import Reply, RunError
from bot.slack.blocks import context, escape, header, section
from storage import repos
from storage.models import ApprovalRequest, Run

log = logging.getLogger(__name__)

ACTION = "skip_preflight"
HELD = "awaiting_approval"


def skip_digest(run: Run) -> str:
    """What a skip approval is for: the held run's compiled operation and its gate (voided if either changes)."""
    payload = {"operation": run.pending_operation, "gate": (run.validation or {}).get("gate_key"), "status": run.status}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def skip_label(recipe: str) -> str:
    """The request's subject, where registration has a model name (texts and digests show it)."""
    return f"skip-preflight:{recipe}"


def ask_again(run: Run) -> str:
    """The command that asks for the same skip again."""
    parts = [f"/finetune run recipe={run.recipe_name}"]
    if run.presets:
        parts.append("preset=" + ",".join(run.presets))
    parts += [f"{k}={v}" for k, v in run.overrides.items()]
    return " ".join([*parts, "--skip-preflight"])


class SkipRequests:
    """Holds a distributed run until approvers let it skip its preflight, then submits it."""

    def __init__(self, deps: RegistryDeps) -> None:
        self.deps = deps

    def request(self, cmd: RunCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """`run … --skip-preflight`: submit when nothing needs skipping, else hold the run and ask approvers."""
        runs = self.deps.runs
        submitter = runs.submitter
        if not runs.people.may_run(user):
            raise RunError(f"<@{user}> may not start runs here; ask someone in FINETUNE_RUNNERS")
        plan = submitter.plan(cmd)
        forced = submitter.memory_gate(plan, cmd, user)
        needed = submitter.gate.verdict(plan, cmd.model_copy(update={"skip_preflight": False}), user=user)
        if needed.allowed:  # single-process, or a preflight passed: there is nothing to skip
            plan.validation = needed.validation
            reply, _ = submitter.start_command(
                plan, cmd, user=user, channel=channel, delivery_key=delivery_key, forced=forced
            )
            why = "a preflight of these pins and presets has passed" if plan.distributed else "it is not distributed"
            return Reply(text=f"{reply.text}\n`--skip-preflight` was not needed: {why}.")
        submitter.gate.verdict(plan, cmd, user=user)  # refuses a non-approver, naming the preflight to run
        command = submitter.gate.command(plan, cmd)
        plan.validation = {"state": HELD, "requested_by": user, "command": command, "gate_key": plan.gate_key}
        reply, run = submitter.start_command(
            plan, cmd, user=user, channel=channel, delivery_key=delivery_key, forced=forced, hold=True
        )
        if run is None:  # the same delivery again: post the request a crash may have kept it from posting
            run = submitter.existing(plan, delivery_key)
            with runs.sessions() as s:
                asked = run is None or bool(repos.list_approval_requests(s, run_id=run.id, action=ACTION))
            if asked or run is None or run.status != HELD:
                return reply
        self._post_request(run, user=user, command=command)
        quorum = self.deps.quorum
        return Reply(
            text=f"`{run.name}` is held: {quorum} approval(s) with :{self.deps.reaction}: from other approvers on "
            "the request in its thread submit it without a preflight (it will show as unvalidated)."
        )

    def _post_request(self, run: Run, *, user: str, command: str) -> None:
        runs, deps = self.deps.runs, self.deps
        now = runs.clock()
        expires_at = now + deps.ttl
        label = skip_label(run.recipe_name)
        blocks = [
            header(f"Approval request: skip the preflight of {run.recipe_name}"),
            section(
                f"<@{user}> asks to run `{run.name}` (distributed) *without* a passed preflight. Nothing validated "
                "its memory, the communication between its workers or its checkpoint recovery on these pins and "
                f"presets. The preflight would be:\n`{escape(command)}`"
            ),
            context(
                f"{deps.quorum} approval(s) with :{deps.reaction}: on this message, from approvers other than "
                f"<@{user}>, submit it · removing a reaction before then withdraws it · expires "
                f"{expires_at:%Y-%m-%d %H:%M} UTC, which cancels the run"
            ),
        ]
        text = f"Approval request: skip the preflight of `{run.name}`"
        ts = runs.thread.post_thread(run, text, purpose="approval_request", blocks=blocks, broadcast=True)
        with runs.sessions() as s:
            request = repos.create_approval_request(
                s,
                run_id=run.id,
                action=ACTION,
                model=label,
                requester=user,
                channel=run.channel,
                message_ts=ts,
                thread_ts=run.thread_ts or ts,
                candidate_digest=skip_digest(run),
                criteria=[],
                status="open",
                expires_at=expires_at,
                quorum=deps.quorum,
            )
            repos.add_audit(
                s,
                user=user,
                channel=run.channel,
                command=f"run recipe={run.recipe_name} --skip-preflight",
                outcome="ok",
                detail=f"approval request {request.id}: held until {deps.quorum} approval(s)",
                run_id=run.id,
            )

    def release(self, request_id: int) -> None:
        """At quorum: claim the request once, then submit the held run unvalidated (called for every approval)."""
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
            validation = {
                "state": "unvalidated",
                "skipped_by": request.requester,
                "approved_by": approvers,
                "approval_request": request_id,
            }
            if not repos.claim_held_run(s, run_id=run.id or 0, from_status=HELD, validation=validation):
                return False
            repos.add_audit(
                s,
                user=request.requester,
                channel=request.channel,
                command=f"skip preflight of {run.name}",
                outcome="ok",
                detail=f"approval request {request_id}: approved by {', '.join(approvers)}",
                run_id=run.id,
            )
            run = repos.get_run(s, run_id=run.id or 0) or run
        who = ", ".join(f"<@{a}>" for a in approvers)
        runs.thread.post_thread(
            run,
            f":warning: Preflight skip approved by {who}: submitting `{run.name}` *unvalidated*.",
            purpose="approval",
        )
        operation: dict[str, Any] = dict(run.pending_operation or {})
        runs.submitter.submit_to_polyaxon(run, operation.get("operation") or {}, operation.get("tags") or [])
        return True

    def retry_pending(self) -> int:
        """Held runs whose request was granted by a process that died before submitting them; how many now."""
        with self.deps.runs.sessions() as s:
            granted = repos.list_approval_requests(s, statuses=["granted"], action=ACTION)
            ids = [r.id or 0 for r in granted if (run := repos.get_run(s, run_id=r.run_id)) and run.status == HELD]
        return sum(self.submit_held(request_id) for request_id in ids)

    def expired(self, request: ApprovalRequest, run: Run) -> None:
        """An expired skip request cancels its held run (once: only a held run moves)."""
        if run.status != HELD:
            return
        runs = self.deps.runs
        runs.thread.transition(
            run,
            status="skipped",
            message="the preflight-skip request expired unapproved",
            text=f":hourglass: Cancelled: the request to skip the preflight expired unapproved. To ask again: "
            f"`{escape(ask_again(run))}`; or validate it: `{escape(str((run.validation or {}).get('command')))}`.",
            pending_operation=None,
        )
