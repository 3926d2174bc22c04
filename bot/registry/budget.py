"""A run over its channel's accelerator-hour budget is held until an approver approves it: registration's rules.

The run passes every other gate first (who may run, memory, the smoke-first gate); then, when its estimate on
top of what the channel spent this period would pass the budget (bot.usage), it is recorded and carded as
`awaiting_approval` with its operation, and an approval request quoting the estimate and the budget goes in
its thread. Approvers other than the requester approve by reaction up to the quorum; it is then submitted.
"""

from __future__ import annotations

from bot.grammar import RunCommand
from bot.registry.holds import HeldRuns, escape_command, run_command
from bot.runs import Reply
from bot.slack.blocks import escape, mention
from bot.usage import BudgetVerdict
from storage.models import Run

ACTION = "budget"


class BudgetHolds(HeldRuns):
    """Holds runs over budget until approvers let them spend it."""

    action = ACTION
    label_prefix = "over-budget"

    def request(self, cmd: RunCommand, verdict: BudgetVerdict, *, user: str, channel: str, delivery_key: str) -> Reply:
        """Hold the run (after its other gates) and ask approvers to let it go over the budget."""
        submitter = self.deps.runs.submitter
        plan, forced = submitter.gated_plan(cmd, user)
        reply, run = self.hold(plan, cmd, user=user, channel=channel, delivery_key=delivery_key, forced=forced)
        if run is None:
            return reply
        return self.ask(run, verdict, user=user)

    def ask(self, run: Run, verdict: BudgetVerdict, *, user: str) -> Reply:
        """Post the approval request for a run (or sweep) held over budget; the reply that says so."""
        what = "sweep" if run.kind == "sweep" else "run"
        self.post_request(run, user=user, detail=verdict.reason, audit=f"{what} recipe={run.recipe_name} over budget")
        return Reply(
            text=f"`{escape(run.name)}` is held: {escape(verdict.reason)}. {self.deps.quorum} approval(s) with "
            f":{self.deps.reaction}: from approvers other than you, on the request in its thread, submit it."
        )

    def request_text(self, run: Run, *, user: str, detail: str) -> tuple[str, str]:
        """The request quotes the estimate and the budget."""
        return (
            f"Approval request: go over the budget for {run.recipe_name}",
            f"{mention(user)} asks to run `{escape(run.name)}`, and {escape(detail)}. It waits, recorded and not "
            "submitted, "
            "until approvers approve.",
        )

    def released_text(self, run: Run, who: str) -> str:
        """Approved: submitted over the budget."""
        return f":moneybag: Going over the budget approved by {who}: submitting `{escape(run.name)}`."

    def expired_text(self, run: Run) -> str:
        """Expired: how to ask again."""
        return (
            ":hourglass: Cancelled: the request to go over the budget expired unapproved. To ask again: "
            f"{escape_command(run_command(run))}"
        )
