"""`/finetune rollback MODEL stage=S`: the stage back to the version that held it before, at once.

Approvers only, never approval-gated: a rollback is what an approver does when the version in a stage
misbehaves, and the version it restores held that stage already (no serving check needed). Audited,
recorded as two stage changes (restored, rolled back) with their webhook events, and told once.
"""

from __future__ import annotations

from bot.grammar import RollbackCommand
from bot.registry.deps import RegistryDeps
from bot.release.ledger import RETIRED, StageLedger
from bot.runs import Reply, RunError
from bot.slack.blocks import escape, mention
from storage import repos


class Rollbacks:
    """Moves a stage back to its previous holder."""

    def __init__(self, deps: RegistryDeps, ledger: StageLedger) -> None:
        self.deps = deps
        self.ledger = ledger

    def rollback(self, cmd: RollbackCommand, *, user: str, channel: str) -> Reply:
        """Restore the previous holder of `cmd.stage`, retire the current one; RunError says why not."""
        from bot.polyaxon import GatewayError, PolyaxonUnreachableError

        runs = self.deps.runs
        if user not in runs.people.approvers():
            self._refused(cmd, user, channel, "not an approver")
            raise RunError(f"only an approver may roll back a stage (FINETUNE_APPROVERS); {mention(user)} is not one")
        holders = self.ledger.holders(cmd.model, cmd.stage)
        if not holders:
            raise RunError(
                f"no version of `{escape(cmd.model)}` is in {escape(cmd.stage)} by the bot's record: "
                "nothing to roll back"
            )
        if len(holders) < 2:
            raise RunError(
                f"`{escape(cmd.model)}:{escape(holders[-1])}` is the only version that held {escape(cmd.stage)}: "
                "there is no earlier one to "
                f"restore. Move it out with a newer version (`/finetune promote {escape(cmd.model)}:VERSION "
                f"stage={escape(cmd.stage)}`)"
            )
        current, previous = holders[-1], holders[-2]
        restore, _ = self.ledger.find_version(cmd.model, previous)
        retire, retire_run = self.ledger.find_version(cmd.model, current)
        stage_now = self.ledger.read_version(retire).stage
        if stage_now != cmd.stage:
            raise RunError(
                f"`{escape(cmd.model)}:{escape(current)}` is in `{escape(str(stage_now))}` in Polyaxon, not "
                f"{escape(cmd.stage)} as the bot recorded: "
                "someone moved it outside the bot. Nothing was changed; set the stage in Polyaxon or promote again"
            )
        try:
            change = self.ledger.move(
                restore, to_stage=cmd.stage, kind="rollback", actor=user, approvers=[], replaces=retire
            )
        except PolyaxonUnreachableError:
            raise  # told as the outage it is, by the command's one answer to an outage
        except GatewayError as exc:
            raise RunError(
                f"Polyaxon did not take the rollback: {self.deps.redact(exc)}. Nothing was recorded; try again"
            ) from exc
        runs.thread.post_thread(
            retire_run,
            self.ledger.told(change),
            purpose="rolled_back",
            broadcast=True,
        )
        return Reply(
            text=f"Rolled back {escape(cmd.stage)}: `{escape(cmd.model)}:{escape(previous)}` is in "
            f"{escape(cmd.stage)} again, `{escape(cmd.model)}:{escape(current)}` "
            f"is `{RETIRED}`. The release webhook sends both changes."
        )

    def _refused(self, cmd: RollbackCommand, user: str, channel: str, why: str) -> None:
        with self.deps.runs.sessions() as s:
            repos.add_audit(
                s,
                user=user,
                channel=channel,
                command=f"rollback {cmd.model} stage={cmd.stage}",
                outcome="refused",
                detail=why,
            )
