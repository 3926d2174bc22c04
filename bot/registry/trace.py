"""`/finetune trace`: a registered version back to its run, recipe, pins, command, checkpoint, eval and approvals."""

from __future__ import annotations

from collections.abc import Callable

from bot.grammar import TraceCommand
from bot.registry.deps import RegistryDeps
from bot.registry.policy import Candidate
from bot.runs import Reply, RunError
from bot.slack.blocks import escape, header, section
from storage import repos
from storage.models import Registration, Run


def validation_lines(run: Run) -> list[str]:
    """How the run passed the smoke-first gate and whether its outputs were confirmed, for the trace."""
    lines = []
    validation = run.validation or {}
    if validation.get("state") == "validated":
        checks = "; ".join(escape(str(line)) for line in validation.get("lines") or [])
        lines.append(
            f"*Validated* by preflight `{escape(str(validation.get('preflight')))}` "
            f"(passed {escape(str(validation.get('passed_at') or ''))}){': ' + checks if checks else ''}"
        )
    elif validation.get("state") == "unvalidated":
        approvers = ", ".join(f"<@{a}>" for a in validation.get("approved_by") or []) or "nobody"
        lines.append(
            f":warning: *Unvalidated*: preflight skipped by <@{validation.get('skipped_by')}>, approved by {approvers}"
        )
    if run.outputs_confirmed_at is not None:
        lines.append(f"*Outputs confirmed* {run.outputs_confirmed_at:%Y-%m-%d %H:%M} UTC (read back and checked)")
    return lines


class Tracer:
    """Shows the whole chain of a registered model version, from Polyaxon and storage."""

    def __init__(self, deps: RegistryDeps) -> None:
        self.deps = deps
        # More of the chain from other rooms (the release path's stage changes), by registration.
        self.extra_lines: list[Callable[[Registration], list[str]]] = []

    def trace(self, cmd: TraceCommand) -> Reply:
        """version -> run -> recipe, pins, presets -> command -> artifacts -> approvals and revocations."""
        from bot.polyaxon import GatewayError

        with self.deps.runs.sessions() as s:
            registrations = list(repos.list_registrations(s, model=cmd.model))
            if cmd.version is not None:
                registrations = [r for r in registrations if r.version == cmd.version]
            if not registrations:
                waiting = repos.list_approval_requests(s, statuses=["open", "approved", "registering"], model=cmd.model)
                label = f"{cmd.model}:{cmd.version}" if cmd.version else cmd.model
                more = f" ({len(waiting)} request(s) awaiting approval or registration)" if waiting else ""
                raise RunError(f"`{escape(label)}` is not registered{more}")
            registration = registrations[-1]
            run = repos.get_run(s, run_id=registration.run_id)
            request = (
                repos.get_approval_request(s, request_id=registration.request_id)
                if registration.request_id is not None
                else None
            )
            approvals = list(repos.list_approvals(s, request_id=request.id or 0)) if request else []
            audit = list(repos.list_audit_for_run(s, run_id=registration.run_id))
        if run is None:
            raise RunError(f"the run of `{cmd.model}:{registration.version}` is missing from the database")
        label = f"{registration.model}:{registration.version}"
        lines: list[str] = []
        try:
            remote = self.deps.gateway.get_model_version(registration.polyaxon_version or "")
            lines.append(
                f"*Version* `{escape(label)}` = Polyaxon model version `{remote.name}` (stage {remote.stage}), "
                f"bound to run `{remote.run_uuid}`, artifacts {', '.join(f'`{a}`' for a in remote.artifacts) or 'none'}"
            )
        except GatewayError as exc:
            lines.append(
                f"*Version* `{escape(label)}` = Polyaxon model version `{registration.polyaxon_version}` "
                f"(Polyaxon unreachable, shown from storage: {self.deps.redact(exc)})"
            )
        lines.append(f"Registered {registration.registered_at:%Y-%m-%d %H:%M} UTC")
        url = self.deps.runs.thread.polyaxon_url(run)
        run_ref = f"<{url}|{run.name}>" if url else f"`{run.name}`"
        lines.append(f"*Run* {run_ref} (`{run.polyaxon_uuid}`, {run.status})")
        pins = ", ".join(f"{k}=`{escape(str(v))}`" for k, v in sorted(run.pins.items())) or "none"
        lines.append(
            f"*Recipe* `{run.recipe_name}` (hash `{run.recipe_hash[:19]}`) · presets {', '.join(run.presets) or 'none'}"
            f" · pins {pins} · eval contract `{run.eval_contract_hash[:19] or '—'}`"
        )
        lines += validation_lines(run)
        started = next((a for a in audit if a.command.startswith(("run ", "resume ")) and a.outcome == "ok"), None)
        overrides = " ".join(f"{k}={v}" for k, v in sorted(run.overrides.items()))
        card = self.deps.runs.thread.permalink(run.channel, run.card_ts)
        when = (started.at if started else run.created_at).strftime("%Y-%m-%d %H:%M")
        lines.append(
            f"*Command* `/finetune run recipe={run.recipe_name}{' ' + escape(overrides) if overrides else ''}` "
            f"by <@{run.requester}> at {when} UTC" + (f" · <{card}|card and thread>" if card else "")
        )
        if request is not None and request.candidate:
            candidate = Candidate.model_validate(request.candidate)
            evals = ", ".join(f"{k} `{v:.4g}`" for k, v in sorted(candidate.eval_results.items())) or "none"
            lines.append(
                f"*Checkpoint* `{escape(candidate.checkpoint_path or '—')}`"
                f" digest `{candidate.checkpoint_digest or '—'}`"
                f" · *eval* {evals} (contract `{candidate.eval_contract_hash[:19] or '—'}`)"
                f" · artifacts {', '.join(registration.artifacts) or 'none'}"
            )
        if request is not None:
            link = self.deps.runs.thread.permalink(request.channel, request.message_ts)
            lines.append(
                f"*Request* by <@{request.requester}> at {request.created_at:%Y-%m-%d %H:%M} UTC"
                + (f" · <{link}|request message>" if link else "")
                + f" · criteria {request.criteria_version} ({sum(bool(c.get('passed')) for c in request.criteria)}"
                f"/{len(request.criteria)} pass) · quorum {request.quorum}"
            )
            for approval in approvals:
                entry = f"• <@{approval.user}> approved {approval.approved_at:%Y-%m-%d %H:%M:%S} UTC"
                if approval.revoked_at is not None:
                    entry += f", revoked {approval.revoked_at:%Y-%m-%d %H:%M:%S} UTC"
                lines.append(entry)
            revocations = [a for a in audit if a.command.startswith("reaction_removed") and a.outcome == "ok"]
            for revocation in revocations:
                if not any(a.user == revocation.user and a.revoked_at for a in approvals):
                    lines.append(f"• <@{revocation.user}> revoked at {revocation.at:%Y-%m-%d %H:%M:%S} UTC")
        for extra in self.extra_lines:
            lines += extra(registration)
        blocks = [header(f"Trace of {label}"), section("\n".join(lines))]
        return Reply(text=f"Trace of {label}", blocks=blocks)
