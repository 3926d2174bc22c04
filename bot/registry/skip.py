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

import logging
from typing import Any

from bot.grammar import RunCommand
from bot.registry.holds import HELD, HeldRuns, escape_command, held_digest, run_command
from bot.runs import Reply
from bot.slack.blocks import escape, mention
from storage.models import ApprovalRequest, Run

log = logging.getLogger(__name__)

ACTION = "skip_preflight"
__all__ = ["ACTION", "HELD", "SkipRequests", "ask_again", "skip_digest", "skip_label"]


def skip_digest(run: Run) -> str:
    """What a skip approval is for: the held run's compiled operation and its gate (voided if either changes)."""
    return held_digest(run)


def skip_label(recipe: str) -> str:
    """The request's subject, where registration has a model name (texts and digests show it)."""
    return f"skip-preflight:{recipe}"


def ask_again(run: Run) -> str:
    """The command that asks for the same skip again."""
    return run_command(run, "--skip-preflight")


class SkipRequests(HeldRuns):
    """Holds a distributed run until approvers let it skip its preflight, then submits it."""

    action = ACTION
    label_prefix = "skip-preflight"

    def request(self, cmd: RunCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """`run … --skip-preflight`: submit when nothing needs skipping, else hold the run and ask approvers."""
        submitter = self.deps.runs.submitter
        plan, forced = submitter.authorised_plan(cmd, user)
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
        reply, run = self.hold(plan, cmd, user=user, channel=channel, delivery_key=delivery_key, forced=forced)
        if run is None:
            return reply
        audit = f"run recipe={run.recipe_name} --skip-preflight"
        self.post_request(run, user=user, detail=command, audit=audit)
        quorum = self.deps.quorum
        return Reply(
            text=f"`{escape(run.name)}` is held: {quorum} approval(s) with :{self.deps.reaction}: from other "
            "approvers on "
            "the request in its thread submit it without a preflight (it will show as unvalidated)."
        )

    def request_text(self, run: Run, *, user: str, detail: str) -> tuple[str, str]:
        """The request asks to run without a passed preflight, and quotes the preflight that would validate it."""
        return (
            f"Approval request: skip the preflight of {run.recipe_name}",
            f"{mention(user)} asks to run `{escape(run.name)}` (distributed) *without* a passed preflight. Nothing "
            "validated "
            "its memory, the communication between its workers or its checkpoint recovery on these pins and "
            f"presets. The preflight would be:\n`{escape(detail)}`",
        )

    def released_validation(self, run: Run, request: ApprovalRequest, approvers: list[str]) -> dict[str, Any] | None:
        """Released runs show as unvalidated, with who skipped and who approved."""
        return {
            "state": "unvalidated",
            "skipped_by": request.requester,
            "approved_by": approvers,
            "approval_request": request.id,
        }

    def released_text(self, run: Run, who: str) -> str:
        """Approved: submitted unvalidated."""
        return f":warning: Preflight skip approved by {who}: submitting `{escape(run.name)}` *unvalidated*."

    def expired_text(self, run: Run) -> str:
        """Expired: how to ask again, or validate it."""
        return (
            f":hourglass: Cancelled: the request to skip the preflight expired unapproved. To ask again: "
            f"{escape_command(ask_again(run))}; or validate it: `{escape(str((run.validation or {}).get('command')))}`."
        )

    def reissue(self, run: Run) -> str:
        """The same skip again."""
        return ask_again(run)
