"""Stage changes, exactly as the bot makes them: the version's stage moved in Polyaxon, the version it replaces
retired, both recorded with the webhook's events in one transaction, and told once.

Only the bot moves stages of the models it registers, so the stage changes it recorded say who holds a stage
and what a rollback restores (`policy.stage_holders`); Polyaxon's own stage is read back before each move.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bot.registry.deps import RegistryDeps
from bot.release.policy import Change, stage_holders
from bot.runs import RunError
from bot.slack.blocks import escape, mention
from storage import repos
from storage.models import ApprovalRequest, Registration, Run, ServingCheck, StageChange

if TYPE_CHECKING:
    from bot.polyaxon import ModelVersion, PolyaxonGateway

RETIRED = "disabled"  # where a replaced or rolled-back version goes: off every stage, restorable


class StageLedger:
    """Reads and moves model versions' stages in Polyaxon and keeps the bot's record of every move."""

    def __init__(self, deps: RegistryDeps) -> None:
        self.deps = deps

    @property
    def gateway(self) -> PolyaxonGateway:
        """The registry's Polyaxon gateway (tests swap it to simulate an outage)."""
        return self.deps.gateway

    def find_version(self, model: str, version: str) -> tuple[Registration, Run]:
        """The registration of model:version and the run it came from; RunError naming the versions there are."""
        with self.deps.runs.sessions() as s:
            registration = repos.get_registration(s, model=model, version=version)
            known = [r.version for r in repos.list_registrations(s, model=model)]
            run = repos.get_run(s, run_id=registration.run_id) if registration is not None else None
        if registration is None:
            there = f"its versions: {escape(', '.join(known))}" if known else "it has no registered version"
            raise RunError(
                f"`{escape(model)}:{escape(version)}` is not registered ({there}); "
                f"`/finetune register RUN model={escape(model)}` registers one"
            )
        if run is None:
            raise RunError(f"the run of `{escape(model)}:{escape(version)}` is missing from the database")
        return registration, run

    def read_version(self, registration: Registration) -> ModelVersion:
        """The version as Polyaxon has it now (RunError while Polyaxon is unreachable: nothing was changed)."""
        from bot.polyaxon import GatewayError, PolyaxonUnreachableError

        try:
            return self.gateway.get_model_version(registration.polyaxon_version or "")
        except PolyaxonUnreachableError:
            raise  # told as the outage it is, by the command's one answer to an outage
        except GatewayError as exc:
            raise RunError(
                f"Polyaxon is unreachable, so the stage of "
                f"`{escape(registration.model)}:{escape(registration.version)}` can't be read: "
                f"{self.deps.redact(exc)}. Nothing was changed; try again."
            ) from exc

    def changes(self, model: str) -> list[Change]:
        """The model's recorded stage changes, oldest first."""
        with self.deps.runs.sessions() as s:
            rows = repos.list_stage_changes(s, model=model)
        return [Change(version=r.version, from_stage=r.from_stage, to_stage=r.to_stage, kind=r.kind) for r in rows]

    def holders(self, model: str, stage: str) -> list[str]:
        """The versions that held `stage`, oldest first (the last holds it now)."""
        return stage_holders(self.changes(model), stage)

    def move(
        self,
        registration: Registration,
        *,
        to_stage: str,
        kind: str,
        actor: str,
        approvers: Sequence[str],
        request: ApprovalRequest | None = None,
        check: ServingCheck | None = None,
        replaces: Registration | None = None,
    ) -> StageChange:
        """Move the version to `to_stage` in Polyaxon, retire the version holding it, record both with their
        webhook events (GatewayError when Polyaxon does not take it: nothing recorded, safe to retry)."""
        holders = self.holders(registration.model, to_stage)
        if replaces is None and holders and holders[-1] != registration.version:
            with self.deps.runs.sessions() as s:
                replaces = repos.get_registration(s, model=registration.model, version=holders[-1])
        who = ", ".join(approvers) or actor
        reason = (
            f"finetune-bot {kind}: {registration.model}:{registration.version} to {to_stage} by {actor}"
            + (f", approved by {who}" if approvers else "")
            + (f" (approval request {request.id})" if request is not None else "")
        )
        before = self.gateway.get_model_version(registration.polyaxon_version or "").stage or "testing"
        self.gateway.stage_model_version(registration.polyaxon_version or "", to_stage, reason=reason)
        retired_from: str | None = None
        if replaces is not None:
            retired_from = self.gateway.get_model_version(replaces.polyaxon_version or "").stage
            if retired_from == to_stage:
                self.gateway.stage_model_version(
                    replaces.polyaxon_version or "",
                    RETIRED,
                    reason=f"finetune-bot: replaced in {to_stage} by {registration.model}:{registration.version}",
                )
        now = self.deps.runs.clock()
        with self.deps.runs.sessions() as s:
            change = repos.add_stage_change(
                s,
                model=registration.model,
                version=registration.version,
                registration_id=registration.id,
                from_stage=before,
                to_stage=to_stage,
                kind=kind,
                request_id=request.id if request is not None else None,
                serving_check_id=check.id if check is not None else None,
                approvers=list(approvers),
                actor=actor,
                reason=reason,
                at=now,
            )
            self._queue(s, change, registration, check=check, replaces=replaces)
            if replaces is not None and retired_from == to_stage:
                retired = repos.add_stage_change(
                    s,
                    model=replaces.model,
                    version=replaces.version,
                    registration_id=replaces.id,
                    from_stage=to_stage,
                    to_stage=RETIRED,
                    kind="rolled_back" if kind == "rollback" else "superseded",
                    request_id=None,
                    approvers=list(approvers),
                    actor=actor,
                    reason=f"replaced in {to_stage} by {registration.version}",
                    at=now,
                )
                self._queue(s, retired, replaces, check=None, replaces=None)
            if request is not None:
                fresh = repos.get_approval_request(s, request_id=request.id or 0)
                if fresh is not None:
                    repos.update_approval_request(s, fresh, status="promoted", decided_at=now, error=None)
            repos.add_audit(
                s,
                user=actor,
                channel=request.channel if request is not None else None,
                command=f"{kind} {registration.model}:{registration.version} stage={to_stage}",
                outcome="ok",
                detail=reason[:2000]
                + (
                    f"; {replaces.version} moved to {RETIRED}"
                    if replaces is not None and retired_from == to_stage
                    else ""
                ),
                run_id=registration.run_id,
            )
            s.commit()
            s.refresh(change)
        return change

    def _queue(
        self,
        s: Any,
        change: StageChange,
        registration: Registration,
        *,
        check: ServingCheck | None,
        replaces: Registration | None,
    ) -> None:
        """The webhook event of one stage change, in the same transaction."""
        event_id = str(uuid.uuid4())
        payload = {
            "id": event_id,
            "type": "model.stage_changed",
            "model": registration.model,
            "version": registration.version,
            "polyaxon_version": registration.polyaxon_version,
            "project": self.deps.runs.settings.polyaxon.project,
            "from_stage": change.from_stage,
            "to_stage": change.to_stage,
            "change": change.kind,
            "previous_version": replaces.version if replaces is not None else None,
            "actor": change.actor,
            "approvers": list(change.approvers),
            "reason": change.reason,
            "serving_check": (
                {"id": check.id, "status": check.status, "spec_digest": check.spec_digest}
                if check is not None
                else None
            ),
            "at": change.at.isoformat(),
        }
        repos.add_release_event(s, event_id=event_id, stage_change_id=change.id, payload=payload)

    def told(self, change: StageChange) -> str:
        """The one post of a stage change, in the version's thread and the channel."""
        label = f"*{escape(change.model)}:{escape(change.version)}*"
        approvers = ", ".join(mention(a) for a in change.approvers)
        with self.deps.runs.sessions() as s:
            retired = [
                c
                for c in repos.list_stage_changes(s, model=change.model)
                if c.id is not None and c.id > (change.id or 0) and c.at == change.at and c.to_stage == RETIRED
            ]
        to_stage, from_stage = escape(change.to_stage), escape(str(change.from_stage))
        line = {
            "promote": f":rocket: {label} is now in *{to_stage}* (from {from_stage})",
            "rollback": f":rewind: Rolled back: {label} is in *{to_stage}* again, by {mention(change.actor)}",
        }.get(change.kind, f"{label}: {from_stage} → {to_stage}")
        parts = [line]
        if approvers and change.kind == "promote":
            parts.append(f"approved by {approvers}, requested by {mention(change.actor)}")
        if change.serving_check_id is not None:
            parts.append(f"serving check #{change.serving_check_id} passed")
        text = "; ".join(parts) + "."
        for other in retired:
            text += f"\n`{escape(other.version)}` left {to_stage} for `{RETIRED}`."
        return text + f"\n`/finetune trace {escape(change.model)}:{escape(change.version)}` shows every stage change."
