"""`/finetune trace`: a registered version back to its run, recipe, pins, command, checkpoint, eval and approvals."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sqlmodel import Session

from bot.grammar import TraceCommand, scalar_text
from bot.registry.deps import RegistryDeps
from bot.registry.policy import Candidate
from bot.runs import Reply, RunError
from bot.runs.admit import again_command
from bot.slack.blocks import escape, header, mention, section
from storage import repos
from storage.models import AuditEntry, Registration, Run

# How far up a chain of resumes and retries the trace walks (each link is one more run that trained the model).
MAX_ANCESTORS = 10


@dataclass(frozen=True)
class Link:
    """One run of the chain that trained a version: the run, its audit entries and the run it started from."""

    run: Run
    audit: Sequence[AuditEntry]
    parent: Run | None


def chain_of(session: Session, run: Run, audit: Sequence[AuditEntry]) -> list[Link]:
    """The run and the runs it was resumed or retried from, newest first (each with its audit)."""
    links: list[Link] = []
    seen: set[int] = set()
    current: Run | None = run
    while current is not None and current.id not in seen and len(links) <= MAX_ANCESTORS:
        seen.add(current.id or 0)
        parent = repos.get_run(session, run_id=current.parent_run_id) if current.parent_run_id else None
        entries = audit if current is run else list(repos.list_audit_for_run(session, run_id=current.id or 0))
        links.append(Link(current, entries, parent))
        current = parent
    return links


def command_text(link: Link) -> str:
    """The command that started the run, as it was typed: `run …`, `resume …`, or the automatic retry."""
    run, parent = link.run, link.parent
    if run.attempt > 1 and parent is not None:
        return f"automatic retry: attempt {run.attempt} after `{escape(parent.name)}` failed"
    entry = next((a for a in link.audit if a.command.startswith("resume ") and a.outcome == "ok"), None)
    if parent is not None and entry is not None:
        typed: dict[str, str] = {}
        for token in entry.command.split()[2:]:
            key, eq, value = token.partition("=")
            if eq:
                typed[key] = value
            elif token != "latest":  # the audit keeps the checkpoint asked for: `latest` or `step-N`
                typed["checkpoint"] = token
        # The schedule a resume extends lives in its overrides: there only when it was typed (or inherited).
        steps = run.overrides.get("max_steps")
        if "max_steps" not in typed and steps is not None and steps != parent.overrides.get("max_steps"):
            typed["max_steps"] = scalar_text(steps)
        pairs = "".join(f" {k}={v}" for k, v in typed.items())
        return f"`/finetune resume {escape(parent.name)}{escape(pairs)}`"
    return f"`{escape(again_command(run))}`"


def started_by(link: Link) -> str:
    """`by <@U> at 2026-05-01 12:00 UTC`: who started the run (the bot, for a retry) and when."""
    verbs = ("run ", "resume ", "retry ", "preflight ", "sweep ")
    entry = next((a for a in link.audit if a.command.startswith(verbs) and a.outcome == "ok"), None)
    user = entry.user if entry is not None else link.run.requester
    who = "the bot" if user == "finetune-bot" else mention(user)
    return f"by {who} at {(entry.at if entry else link.run.created_at):%Y-%m-%d %H:%M} UTC"


def origin_lines(links: Sequence[Link]) -> list[str]:
    """Where each run of the chain started: the checkpoint of its parent it loaded, or from the beginning."""
    lines = []
    for link in links:
        if link.parent is None:
            break
        parent = link.parent
        resume_from = link.run.params.get("resume_from")
        start = f"`{escape(str(resume_from))}`" if resume_from else "the beginning (no checkpoint)"
        ancestor = next((a for a in links if a.run.id == parent.id), None)
        how = f", itself started with {command_text(ancestor)} {started_by(ancestor)}" if ancestor is not None else ""
        lines.append(
            f"• `{escape(link.run.name)}` started from {start} of `{escape(parent.name)}` "
            f"(`{escape(parent.polyaxon_uuid or '—')}`, {escape(parent.status)}){how}"
        )
    return lines


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
        approvers = ", ".join(mention(a) for a in validation.get("approved_by") or []) or "nobody"
        skipped_by = mention(str(validation.get("skipped_by")))
        lines.append(f":warning: *Unvalidated*: preflight skipped by {skipped_by}, approved by {approvers}")
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
            links = chain_of(s, run, audit) if run is not None else []
        if run is None:
            raise RunError(
                f"the run of `{escape(cmd.model)}:{escape(registration.version)}` is missing from the database"
            )
        label = f"{registration.model}:{registration.version}"
        lines: list[str] = []
        try:
            remote = self.deps.gateway.get_model_version(registration.polyaxon_version or "")
            lines.append(
                f"*Version* `{escape(label)}` = Polyaxon model version `{escape(remote.name)}` "
                f"(stage {escape(str(remote.stage))}), bound to run `{escape(str(remote.run_uuid))}`, "
                f"artifacts {', '.join(f'`{escape(a)}`' for a in remote.artifacts) or 'none'}"
            )
        except GatewayError as exc:
            lines.append(
                f"*Version* `{escape(label)}` = Polyaxon model version `{escape(str(registration.polyaxon_version))}` "
                f"(Polyaxon unreachable, shown from storage: {self.deps.redact(exc)})"
            )
        lines.append(f"Registered {registration.registered_at:%Y-%m-%d %H:%M} UTC")
        url = self.deps.runs.thread.polyaxon_url(run)
        run_ref = f"<{url}|{escape(run.name)}>" if url else f"`{escape(run.name)}`"
        lines.append(f"*Run* {run_ref} (`{escape(str(run.polyaxon_uuid))}`, {escape(run.status)})")
        pins = ", ".join(f"{escape(k)}=`{escape(str(v))}`" for k, v in sorted(run.pins.items())) or "none"
        lines.append(
            f"*Recipe* `{escape(run.recipe_name)}` (hash `{escape(run.recipe_hash[:19])}`"
            + (f", catalog `{escape(run.catalog_revision)}`" if run.catalog_revision else "")
            + ") "
            f"· presets {escape(', '.join(run.presets)) or 'none'}"
            f" · pins {pins} · eval contract `{escape(run.eval_contract_hash[:19] or '—')}`"
        )
        lines += validation_lines(run)
        card = self.deps.runs.thread.permalink(run.channel, run.card_ts)
        lines.append(
            f"*Command* {command_text(links[0])} {started_by(links[0])}"
            + (f" · <{card}|card and thread>" if card else "")
        )
        origins = origin_lines(links)
        if origins:
            lines.append("*Started from*\n" + "\n".join(origins))
        if request is not None and request.candidate:
            candidate = Candidate.model_validate(request.candidate)
            evals = ", ".join(f"{escape(k)} `{v:.4g}`" for k, v in sorted(candidate.eval_results.items())) or "none"
            lines.append(
                f"*Checkpoint* `{escape(candidate.checkpoint_path or '—')}`"
                f" digest `{escape(candidate.checkpoint_digest or '—')}`"
                f" · *eval* {evals} (contract `{escape(candidate.eval_contract_hash[:19] or '—')}`)"
                f" · artifacts {escape(', '.join(registration.artifacts)) or 'none'}"
            )
        if request is not None:
            link = self.deps.runs.thread.permalink(request.channel, request.message_ts)
            lines.append(
                f"*Request* by {mention(request.requester)} at {request.created_at:%Y-%m-%d %H:%M} UTC"
                + (f" · <{link}|request message>" if link else "")
                + f" · criteria {escape(str(request.criteria_version))} "
                f"({sum(bool(c.get('passed')) for c in request.criteria)}/{len(request.criteria)} pass) "
                f"· quorum {request.quorum}"
            )
            for approval in approvals:
                entry = f"• {mention(approval.user)} approved {approval.approved_at:%Y-%m-%d %H:%M:%S} UTC"
                if approval.revoked_at is not None:
                    entry += f", revoked {approval.revoked_at:%Y-%m-%d %H:%M:%S} UTC"
                lines.append(entry)
            revocations = [a for a in audit if a.command.startswith("reaction_removed") and a.outcome == "ok"]
            for revocation in revocations:
                if not any(a.user == revocation.user and a.revoked_at for a in approvals):
                    lines.append(f"• {mention(revocation.user)} revoked at {revocation.at:%Y-%m-%d %H:%M:%S} UTC")
        for extra in self.extra_lines:
            lines += extra(registration)
        blocks = [header(f"Trace of {label}"), section("\n".join(lines))]
        return Reply(text=f"Trace of {escape(label)}", blocks=blocks)
