"""Approval-gated model registration: `/finetune register`, approval by reaction, and `/finetune trace`.

The policy is pure (`bot/approvals.py`); this service binds it to Slack, storage and Polyaxon. One request
message per candidate (posted in the run's thread and sent to the channel), approvals only as the configured
reaction on exactly that message, and a conditional row claim so that a quorum registers exactly once, however
many approvals or retries arrive together.
"""

from __future__ import annotations

import logging
import re
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from slack_sdk.errors import SlackApiError
from sqlalchemy.exc import IntegrityError

from bot.approvals import (
    Candidate,
    CriteriaError,
    CriterionResult,
    CurrentVersion,
    RequestView,
    Verdict,
    evaluate_criteria,
    judge_reaction,
    load_criteria,
)
from bot.blocks import context, escape, header, section
from bot.grammar import RegisterCommand, TraceCommand
from bot.redact import redact
from bot.runs import Reply, RunError, RunService
from storage import repos
from storage.models import ApprovalRequest, Run

if TYPE_CHECKING:
    from bot.polyaxon import PolyaxonGateway

log = logging.getLogger(__name__)

RECORDED_REACTION = "floppy_disk"
REGISTERED_EVENT = "finetune_registered"  # message metadata of the registration summary
# Lineage that describes the run, not the model: metrics, the environment, system resources (cpu, memory, load).
NOT_MODEL_ARTIFACTS = frozenset({"metric", "env", "system", "span"})
# A registration claim older than this belongs to a process that died mid-way: the next retry takes it over.
STALE_CLAIM = timedelta(minutes=5)
_SKIN_TONE = re.compile(r"::skin-tone-\d$")


def polyaxon_version_name(model: str, version: str) -> str:
    """The model version's name in Polyaxon's project registry (one namespace per project: model and version)."""
    return re.sub(r"[^a-z0-9-]+", "-", f"{model}-{version}".lower()).strip("-")


def next_version(taken: set[str]) -> str:
    """`v1`, `v2`, … : one more than the highest `vN` already taken."""
    numbers = [int(v[1:]) for v in taken if re.fullmatch(r"v\d+", v)]
    return f"v{max(numbers, default=0) + 1}"


def _view_status(status: str) -> Any:
    # Quorum reached (approved, registering): the count is closed, as it is once registered.
    return "registering" if status in ("approved", "registering") else status


class RegistrationService:
    """Posts approval requests, judges reactions on them, registers approved candidates, traces versions."""

    def __init__(
        self, runs: RunService, *, criteria_dir: Path | None = None, gateway: PolyaxonGateway | None = None
    ) -> None:
        self.runs = runs
        self.settings = runs.settings
        self.sessions = runs.sessions
        self.client = runs.client
        self.gateway = gateway or runs.gateway
        self.clock = runs.clock
        self.criteria_dir = criteria_dir or Path(self.settings.finetune.catalog_dir) / "criteria"
        self.reaction = self.settings.finetune.approval_reaction
        # Read when a request is made and stored with it: a request keeps the quorum it was made under.
        self.quorum = self.settings.finetune.approval_quorum
        self.ttl = timedelta(hours=self.settings.finetune.approval_ttl_hours)
        self._bot_user: str | None = None

    # --- the candidate ----------------------------------------------------------------------------

    def read_candidate(self, run: Run) -> tuple[Candidate, list[str]]:
        """The run's candidate as Polyaxon has it now, and the lineage names to register (GatewayError when down)."""
        uuid = run.polyaxon_uuid or ""
        info = self.gateway.get_run(uuid, with_conditions=False)
        artifacts: list[str] = []
        names: list[str] = []
        checkpoint_path: str | None = None
        checkpoint_digest: str | None = None
        for artifact in self.gateway.lineage(uuid):
            if artifact.kind in NOT_MODEL_ARTIFACTS or artifact.is_input:
                continue
            names.append(artifact.name)
            label = artifact.name
            if artifact.kind == "model":
                label = "checkpoint"
                checkpoint_path = artifact.path or artifact.summary.get("path")
                digest = artifact.summary.get("hash")
                checkpoint_digest = str(digest) if digest else None
            if label not in artifacts:
                artifacts.append(label)
        eval_results = {
            key: float(value)
            for key, value in info.outputs.items()
            if key.startswith("eval_") and isinstance(value, int | float) and not isinstance(value, bool)
        }
        candidate = Candidate(
            run_uuid=uuid,
            run_name=run.name,
            checkpoint_path=checkpoint_path,
            checkpoint_digest=checkpoint_digest,
            artifacts=sorted(artifacts),
            eval_results=eval_results,
            eval_contract_hash=str(info.outputs.get("eval_contract_hash") or run.eval_contract_hash or ""),
            pins=dict(run.pins),
        )
        return candidate, sorted(set(names))

    def current_version(self, model: str) -> CurrentVersion | None:
        """The model's latest registered version, with the eval results it was approved on (from storage)."""
        with self.sessions() as s:
            registrations = list(repos.list_registrations(s, model=model))
            if not registrations:
                return None
            latest = registrations[-1]
            request = (
                repos.get_approval_request(s, request_id=latest.request_id) if latest.request_id is not None else None
            )
        snapshot = Candidate.model_validate(request.candidate) if request is not None and request.candidate else None
        return CurrentVersion(
            version=latest.version,
            eval_results=snapshot.eval_results if snapshot else {},
            eval_contract_hash=snapshot.eval_contract_hash if snapshot else "",
        )

    # --- /finetune register -------------------------------------------------------------------------

    def register(self, cmd: RegisterCommand, *, user: str, channel: str) -> Reply:
        """Post an approval request for a succeeded run's candidate, with every criterion and its evidence."""
        from bot.polyaxon import GatewayError

        run = self.runs.find(cmd.run)
        if run.status != "succeeded" or not run.polyaxon_uuid:
            raise RunError(f"run `{run.name}` is {run.status}: only a run that succeeded can be registered")
        if cmd.version is not None:
            with self.sessions() as s:
                taken = repos.get_registration(s, model=cmd.model, version=cmd.version)
            if taken is not None:
                raise RunError(f"`{cmd.model}:{cmd.version}` is registered already; choose another `version=`")
        try:
            criteria = load_criteria(self.criteria_dir, cmd.model)
        except CriteriaError as exc:
            raise RunError(f"the registration criteria can't be read: {escape(str(exc))}") from exc
        try:
            candidate, _ = self.read_candidate(run)
        except GatewayError as exc:
            raise RunError(
                f"Polyaxon is unreachable, so the candidate of `{run.name}` can't be read: {self._redact(exc)}. "
                "Nothing was requested; try again."
            ) from exc
        digest = candidate.digest()
        now = self.clock()
        with self.sessions() as s:
            earlier = list(repos.list_approval_requests(s, statuses=["open"], run_id=run.id, model=cmd.model))
        for old in earlier:
            if old.expires_at is not None and old.expires_at <= now:
                self._expire(old, run)
            elif old.candidate_digest == digest:
                link = self.runs.permalink(old.channel, old.message_ts)
                where = f"<{link}|the open request>" if link else "the open request"
                raise RunError(f"`{run.name}` already has an open request for `{cmd.model}`: react on {where}")
            else:
                self._void(old, run, new_digest=digest)
        current = self.current_version(cmd.model)
        results = evaluate_criteria(criteria, candidate, current)
        expires_at = now + self.ttl
        blocks = render_request(
            model=cmd.model,
            version=cmd.version,
            candidate=candidate,
            results=results,
            criteria_label=f"{criteria.source} v{criteria.version}",
            requester=user,
            run_requester=run.requester,
            reaction=self.reaction,
            quorum=self.quorum,
            expires_at=expires_at,
        )
        passed = sum(r.passed for r in results)
        text = f"Approval request: register `{run.name}` as {cmd.model} ({passed}/{len(results)} criteria pass)"
        kwargs: dict[str, Any] = {"channel": run.channel, "text": text, "blocks": blocks}
        if run.thread_ts:
            kwargs.update(thread_ts=run.thread_ts, reply_broadcast=True)  # in the thread, and sent to the channel
        ts = str(self.client.chat_postMessage(**kwargs)["ts"])
        thread_ts = run.thread_ts or ts
        with self.sessions() as s:
            request = repos.create_approval_request(
                s,
                run_id=run.id,
                model=cmd.model,
                version=cmd.version,
                requester=user,
                channel=run.channel,
                message_ts=ts,
                thread_ts=thread_ts,
                checkpoint_path=candidate.checkpoint_path,
                candidate_digest=digest,
                criteria=[r.model_dump() for r in results],
                criteria_version=f"{criteria.source}@{criteria.version}",
                status="open",
                expires_at=expires_at,
                candidate=candidate.model_dump(),
                quorum=self.quorum,
            )
            repos.record_posted_message(
                s, channel=run.channel, ts=ts, purpose="approval_request", run_id=run.id, thread_ts=thread_ts
            )
            repos.add_audit(
                s,
                user=user,
                channel=channel,
                command=f"register {run.name} model={cmd.model}" + (f" version={cmd.version}" if cmd.version else ""),
                outcome="ok",
                detail=f"approval request {request.id}: {passed}/{len(results)} criteria pass",
                run_id=run.id,
            )
        link = self.runs.permalink(run.channel, ts)
        where = f"<{link}|approval request>" if link else "approval request"
        return Reply(
            text=f"Posted the {where} for `{cmd.model}` in the thread of `{run.name}`: "
            f"{self.quorum} approval(s) with :{self.reaction}: from approvers register it."
        )

    # --- reactions --------------------------------------------------------------------------------

    def on_reaction(self, event: dict[str, Any]) -> None:
        """Judge one reaction_added / reaction_removed; reactions unrelated to approval requests are ignored."""
        item = event.get("item") or {}
        if item.get("type") != "message":
            return
        added = event.get("type") == "reaction_added"
        channel, ts = str(item.get("channel") or ""), str(item.get("ts") or "")
        user = str(event.get("user") or "")
        reaction = _SKIN_TONE.sub("", str(event.get("reaction") or ""))
        if not user or user == self.bot_user():
            return
        with self.sessions() as s:
            request = repos.get_approval_request_by_message(s, channel=channel, message_ts=ts)
            on_request = request is not None
            if request is None:
                # The approval emoji on another of the bot's messages of a run with an open request: tell them
                # where approvals count. Anything else is none of the bot's business.
                posted = repos.get_posted_message(s, channel=channel, ts=ts)
                if not added or reaction != self.reaction or posted is None or posted.run_id is None:
                    return
                open_requests = repos.list_approval_requests(s, statuses=["open"], run_id=posted.run_id)
                if not open_requests:
                    return
                request = open_requests[-1]
            run = repos.get_run(s, run_id=request.run_id)
            approved = {a.user for a in repos.active_approvals(s, request_id=request.id or 0)}
        if run is None:
            return
        if (
            not added
            and on_request
            and reaction == self.reaction
            and user in approved
            and request.status == "approved"
            and self._reopen(request)
        ):
            # Quorum was reached but registration has not started (Polyaxon was down): the removal still
            # comes before registration, so it revokes, and the request waits for its quorum again.
            request.status = "open"
        verdict = self._judge(
            request, run, added=added, on_request=on_request, user=user, reaction=reaction, approved=approved
        )
        if verdict.counts:
            fresh = self._fresh_digest(run)
            if fresh is not None and fresh != request.candidate_digest:
                self._void(request, run, new_digest=fresh)
                verdict = self._judge(
                    request,
                    run,
                    added=added,
                    on_request=on_request,
                    user=user,
                    reaction=reaction,
                    approved=approved,
                    current_digest=fresh,
                )
        self._act(request, run, verdict, added=added, user=user, reaction=reaction)

    def _judge(
        self,
        request: ApprovalRequest,
        run: Run,
        *,
        added: bool,
        on_request: bool,
        user: str,
        reaction: str,
        approved: set[str],
        current_digest: str | None = None,
    ) -> Verdict:
        view = RequestView(
            status=_view_status(request.status),
            requester=request.requester,
            run_requester=run.requester,
            expires_at=request.expires_at,
            candidate_digest=request.candidate_digest,
            current_digest=current_digest,
        )
        return judge_reaction(
            added=added,
            request=view,
            on_request_message=on_request,
            user=user,
            reaction=reaction,
            approval_reaction=self.reaction,
            approvers=self.runs.approvers(),
            already_approved=approved,
            now=self.clock(),
        )

    def _act(
        self, request: ApprovalRequest, run: Run, verdict: Verdict, *, added: bool, user: str, reaction: str
    ) -> None:
        request_id = request.id or 0
        verb = "reaction_added" if added else "reaction_removed"
        outcome = "ignored"
        progress: str | None = None
        reason = verdict.reason
        if verdict.code == "counts":
            with self.sessions() as s:
                try:
                    recorded = repos.add_approval(
                        s, request_id=request_id, user=user, reaction=reaction, message_ts=request.message_ts or ""
                    )
                    s.commit()
                except IntegrityError:  # the same approval, recorded by a concurrent delivery
                    s.rollback()
                    recorded = None
            if recorded is None:  # a concurrent event for the same reaction recorded it first
                verdict = Verdict(code="duplicate")
            else:
                outcome = "ok"
                with self.sessions() as s:
                    count = len(repos.active_approvals(s, request_id=request_id))
                progress = f":{self.reaction}: <@{user}> approved `{request.model}` ({count}/{request.quorum})."
        elif verdict.code == "revokes":
            with self.sessions() as s:
                revoked = repos.revoke_approval(s, request_id=request_id, user=user)
                count = len(repos.active_approvals(s, request_id=request_id))
            if revoked is not None:
                outcome = "ok"
                progress = (
                    f":leftwards_arrow_with_hook: <@{user}> withdrew their approval of `{request.model}` "
                    f"({count}/{request.quorum})."
                )
        elif verdict.code == "expired" and request.status == "open":
            self._expire(request, run)
        elif verdict.code == "closed" and not added and request.status == "registered":
            with self.sessions() as s:
                registration = repos.registration_for_request(s, request_id=request_id)
            label = f"{request.model}:{registration.version}" if registration else request.model
            reason = f"<@{user}> removed :{reaction}: after registration: `{label}` stays registered"
        elif verdict.code == "closed" and not added and request.status in ("approved", "registering"):
            # The registration call is in flight: too late to withdraw (an approved request is reopened above).
            reason = (
                f"<@{user}> removed :{reaction}: while `{request.model}` was being registered: "
                "the approval stands for this registration"
            )
        with self.sessions() as s:
            repos.add_audit(
                s,
                user=user,
                channel=request.channel,
                command=f"{verb} :{reaction}: on approval request {request_id}",
                outcome=outcome,
                detail=verdict.code + (f": {reason}" if reason else ""),
                run_id=run.id,
            )
        if progress is not None:
            self.runs.post_thread(run, progress, purpose="approval")
        if reason and self._first_notice(request_id, user, verdict.code):
            self.runs.post_thread(run, f":information_source: {reason}", purpose="approval_notice")
        if outcome == "ok":
            # An approval may complete the quorum; so may a revocation on a reopened request that kept it.
            self._maybe_register(request_id)

    def _first_notice(self, request_id: int, user: str, code: str) -> bool:
        with self.sessions() as s:
            return repos.record_notice(s, request_id=request_id, user=user, code=code)

    def _fresh_digest(self, run: Run) -> str | None:
        """The candidate's digest now; None when Polyaxon can't say (checked again before registering)."""
        from bot.polyaxon import GatewayError

        try:
            return self.read_candidate(run)[0].digest()
        except GatewayError as exc:
            log.warning("registry: can't re-read the candidate of %s: %s", run.name, exc)
            return None

    def _reopen(self, request: ApprovalRequest) -> bool:
        """Approved but not yet registering -> open again; False once a registration attempt has claimed it."""
        with self.sessions() as s:
            return repos.claim_approval_request(
                s, request_id=request.id or 0, from_statuses=["approved"], to_status="open", decided_at=None
            )

    def _expire(self, request: ApprovalRequest, run: Run) -> bool:
        """Close an open request past its expiry; whoever closes it (sweep, reaction, re-issue) says so, once."""
        count = 0
        with self.sessions() as s:
            closed = repos.claim_approval_request(
                s, request_id=request.id or 0, from_statuses=["open"], to_status="expired", decided_at=self.clock()
            )
            if closed:
                count = len(repos.active_approvals(s, request_id=request.id or 0))
        if closed:
            self.runs.post_thread(
                run,
                f":hourglass: The approval request for `{request.model}` expired unapproved "
                f"({count}/{request.quorum} approvals). To ask again: "
                f"`/finetune register {run.name} model={request.model}`.",
                purpose="approval_expired",
            )
        return closed

    def expire_due(self) -> int:
        """Close every open request past its expiry (a watcher tick); how many were closed now."""
        now = self.clock()
        with self.sessions() as s:
            due = [
                (request, repos.get_run(s, run_id=request.run_id))
                for request in repos.list_approval_requests(s, statuses=["open"], expires_by=now)
            ]
        return sum(self._expire(request, run) for request, run in due if run is not None)

    def _void(
        self, request: ApprovalRequest, run: Run, *, new_digest: str, from_statuses: tuple[str, ...] = ("open",)
    ) -> None:
        """The candidate changed: the request and every approval on it no longer count."""
        digests = f"{request.candidate_digest[:12]} -> {new_digest[:12]}"
        self._void_request(
            request,
            run,
            from_statuses=from_statuses,
            error=f"candidate changed: {digests}",
            audit=f"candidate digest {digests}",
            told=f":no_entry: The approval request for `{request.model}` is *voided*: the candidate changed after it "
            f"was made (digest `{request.candidate_digest[:12]}` → `{new_digest[:12]}`: new checkpoint, "
            f"re-evaluation or different artifacts). Its approvals no longer count; re-issue "
            f"`/finetune register {run.name} model={request.model}`.",
        )

    def _void_request(
        self, request: ApprovalRequest, run: Run, *, from_statuses: tuple[str, ...], error: str, audit: str, told: str
    ) -> bool:
        """Move the request to `voided` (once, whoever gets there first), audit it, and tell the thread."""
        with self.sessions() as s:
            voided = repos.claim_approval_request(
                s,
                request_id=request.id or 0,
                from_statuses=list(from_statuses),
                to_status="voided",
                decided_at=self.clock(),
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
        if voided:
            self.runs.post_thread(run, told, purpose="approval_voided")
        return voided

    # --- registration -----------------------------------------------------------------------------

    def _maybe_register(self, request_id: int) -> None:
        with self.sessions() as s:
            request = repos.get_approval_request(s, request_id=request_id)
            count = len(repos.active_approvals(s, request_id=request_id))
        if request is None or count < request.quorum:
            return
        with self.sessions() as s:
            won = repos.claim_approval_request(
                s, request_id=request_id, from_statuses=["open"], to_status="approved", decided_at=self.clock()
            )
        if won:
            self._register(request_id)

    def _register(self, request_id: int) -> bool:
        """Register an approved request (the caller holds no claim; this takes it); True when registered now."""
        from bot.polyaxon import GatewayError

        now = self.clock()
        with self.sessions() as s:
            if not repos.claim_approval_request(
                s, request_id=request_id, from_statuses=["approved"], to_status="registering", claimed_at=now
            ):
                return False
            request = repos.get_approval_request(s, request_id=request_id)
            run = repos.get_run(s, run_id=request.run_id) if request is not None else None
            approvals = list(repos.active_approvals(s, request_id=request_id))
            taken = {r.version for r in repos.list_registrations(s, model=request.model)} if request else set()
        if request is None or run is None:
            return False
        try:
            candidate, names = self.read_candidate(run)
        except GatewayError as exc:
            return self._pending(request, run, exc)
        if candidate.digest() != request.candidate_digest:
            self._void(request, run, new_digest=candidate.digest(), from_statuses=("registering",))
            return False
        if request.version is not None and request.version in taken:
            return self._version_taken(request, run)
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
            model_version = self.gateway.register_model_version(
                name,
                run_uuid=run.polyaxon_uuid or "",
                artifacts=names,
                description=f"{request.model}:{version} from {run.name}, approved by "
                + ", ".join(a.user for a in approvals),
                tags=["finetune-bot", request.model],
                content=content,
            )
        except GatewayError as exc:
            return self._pending(request, run, exc)
        try:
            with self.sessions() as s:
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
                        s, fresh, status="registered", version=version, decided_at=self.clock(), error=None
                    )
                registration_id = registration.id
        except (repos.DuplicateError, IntegrityError) as exc:
            return self._pending(request, run, exc)
        log.info(
            "registry: %s:%s registered from %s (registration %s)", request.model, version, run.name, registration_id
        )
        # Committed: only now does the message say so.
        self._record(request_id)
        return True

    def _version_taken(self, request: ApprovalRequest, run: Run) -> bool:
        """The version asked for was registered by another request meanwhile: retrying can't help, so void."""
        label = f"{request.model}:{request.version}"
        self._void_request(
            request,
            run,
            from_statuses=("registering",),
            error=f"{label} was registered by another request",
            audit=f"{label} taken by another request",
            told=f":no_entry: The approval request for `{label}` is *voided*: that version was registered by another "
            f"request after this one was made. Re-issue with another version: "
            f"`/finetune register {run.name} model={request.model} version=…` (or leave `version=` out).",
        )
        return False

    def _pending(self, request: ApprovalRequest, run: Run, exc: Exception) -> bool:
        """Registration failed (Polyaxon down, version taken): the request stays approved, retried every tick."""
        reason = self._redact(exc)
        with self.sessions() as s:
            repos.claim_approval_request(
                s, request_id=request.id or 0, from_statuses=["registering"], to_status="approved", error=reason[:2000]
            )
            repos.add_audit(
                s,
                user=request.requester,
                channel=request.channel,
                command=f"register approval request {request.id}",
                outcome="error",
                detail=reason[:2000],
                run_id=run.id,
            )
        if request.error is None and self._first_notice(request.id or 0, "bot", "pending"):
            self.runs.post_thread(
                run,
                f":hourglass_flowing_sand: Quorum reached for `{request.model}`, but registering failed: {reason}\n"
                "The request stays *approved*, nothing is lost: the bot retries on every watcher tick.",
                purpose="approval_pending",
            )
        return False

    def _record(self, request_id: int, *, recovering: bool = False) -> None:
        """After the registration is committed: the bot's recorded reaction and the summary in the thread.

        `recovering`: an earlier process may have died after posting the summary and before noting it, so
        the thread is read back first (the summary carries the request id in its message metadata).
        """
        with self.sessions() as s:
            request = repos.get_approval_request(s, request_id=request_id)
            if request is None:
                return
            run = repos.get_run(s, run_id=request.run_id)
            registration = repos.registration_for_request(s, request_id=request_id)
            approvals = list(repos.active_approvals(s, request_id=request_id))
        if run is None or registration is None:
            return
        try:
            self.client.reactions_add(
                channel=request.channel, timestamp=request.message_ts or "", name=RECORDED_REACTION
            )
        except SlackApiError as exc:
            if exc.response.get("error") != "already_reacted":
                raise
        approver_lines = []
        for approval in approvals:
            link = self.runs.permalink(request.channel, approval.message_ts)
            where = f"<{link}|:{approval.reaction}: on the request>" if link else f":{approval.reaction}:"
            approver_lines.append(f"<@{approval.user}> ({where}, {approval.approved_at:%Y-%m-%d %H:%M} UTC)")
        results = [CriterionResult.model_validate(c) for c in request.criteria]
        passed = sum(r.passed for r in results)
        lines = "\n".join(f"{':white_check_mark:' if r.passed else ':x:'} {escape(r.name)}" for r in results)
        text = (
            f":{RECORDED_REACTION}: Registered *{escape(request.model)}:{escape(registration.version)}* "
            f"(Polyaxon model version `{registration.polyaxon_version}`) from `{run.name}`.\n"
            f"Approved by {', '.join(approver_lines)}.\n"
            f"Criteria ({request.criteria_version}): {passed}/{len(results)} pass\n{lines}\n"
            f"`/finetune trace {request.model}:{registration.version}` shows the whole chain."
        )
        if not recovering or self.runs.find_thread_post(run, REGISTERED_EVENT, request_id=request_id) is None:
            self.runs.post_thread(
                run,
                text,
                purpose="registered",
                metadata={"event_type": REGISTERED_EVENT, "event_payload": {"request_id": request_id}},
            )
        with self.sessions() as s:
            fresh = repos.get_approval_request(s, request_id=request_id)
            if fresh is not None:
                repos.update_approval_request(s, fresh, recorded_at=self.clock())

    def retry_pending(self) -> int:
        """Register requests left approved (Polyaxon was down) or claimed by a process that died; how many now."""
        now = self.clock()
        with self.sessions() as s:
            work = repos.registration_work(s)
            # A claim younger than STALE_CLAIM belongs to a process that may still be working on it.
            stale_claim = [r for r in work if r.claimed_at is None or now - r.claimed_at > STALE_CLAIM]
            approved = [r.id or 0 for r in work if r.status == "approved"]
            stale = [r.id or 0 for r in stale_claim if r.status == "registering"]
            unrecorded = [r.id or 0 for r in stale_claim if r.status == "registered"]
            for request_id in stale:
                repos.claim_approval_request(
                    s, request_id=request_id, from_statuses=["registering"], to_status="approved"
                )
        done = sum(self._register(request_id) for request_id in approved + stale)
        for request_id in unrecorded:
            self._record(request_id, recovering=True)
        return done

    # --- /finetune trace ----------------------------------------------------------------------------

    def trace(self, cmd: TraceCommand) -> Reply:
        """version -> run -> recipe, pins, presets -> command -> artifacts -> approvals and revocations."""
        from bot.polyaxon import GatewayError

        with self.sessions() as s:
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
            remote = self.gateway.get_model_version(registration.polyaxon_version or "")
            lines.append(
                f"*Version* `{escape(label)}` = Polyaxon model version `{remote.name}` (stage {remote.stage}), "
                f"bound to run `{remote.run_uuid}`, artifacts {', '.join(f'`{a}`' for a in remote.artifacts) or 'none'}"
            )
        except GatewayError as exc:
            lines.append(
                f"*Version* `{escape(label)}` = Polyaxon model version `{registration.polyaxon_version}` "
                f"(Polyaxon unreachable, shown from storage: {self._redact(exc)})"
            )
        lines.append(f"Registered {registration.registered_at:%Y-%m-%d %H:%M} UTC")
        url = self.runs.polyaxon_url(run)
        run_ref = f"<{url}|{run.name}>" if url else f"`{run.name}`"
        lines.append(f"*Run* {run_ref} (`{run.polyaxon_uuid}`, {run.status})")
        pins = ", ".join(f"{k}=`{escape(str(v))}`" for k, v in sorted(run.pins.items())) or "none"
        lines.append(
            f"*Recipe* `{run.recipe_name}` (hash `{run.recipe_hash[:19]}`) · presets {', '.join(run.presets) or 'none'}"
            f" · pins {pins} · eval contract `{run.eval_contract_hash[:19] or '—'}`"
        )
        started = next((a for a in audit if a.command.startswith(("run ", "resume ")) and a.outcome == "ok"), None)
        overrides = " ".join(f"{k}={v}" for k, v in sorted(run.overrides.items()))
        card = self.runs.permalink(run.channel, run.card_ts)
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
            link = self.runs.permalink(request.channel, request.message_ts)
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
        blocks = [header(f"Trace of {label}"), section("\n".join(lines))]
        return Reply(text=f"Trace of {label}", blocks=blocks)

    # --- helpers ------------------------------------------------------------------------------------

    def bot_user(self) -> str | None:
        """The bot's own user id (auth.test, once): its own reactions are never judged."""
        if self._bot_user is None:
            try:
                self._bot_user = str(self.client.auth_test().get("user_id") or "") or None
            except SlackApiError:
                return None
        return self._bot_user

    def _redact(self, exc: BaseException) -> str:
        return escape(redact(str(exc), extra_secrets=self.runs.secrets))


def render_request(
    *,
    model: str,
    version: str | None,
    candidate: Candidate,
    results: list[CriterionResult],
    criteria_label: str,
    requester: str,
    run_requester: str,
    reaction: str,
    quorum: int,
    expires_at: datetime,
) -> list[dict[str, Any]]:
    """The approval request message: the candidate, every criterion with its evidence, how to approve."""
    evals = " · ".join(f"{k} `{v:.4g}`" for k, v in sorted(candidate.eval_results.items())) or "none"
    pins = " · ".join(f"{k} `{escape(str(v))}`" for k, v in sorted(candidate.pins.items())) or "none"
    candidate_lines = [
        f"*Run* `{candidate.run_name}` (`{candidate.run_uuid}`)",
        f"*Checkpoint* `{escape(candidate.checkpoint_path or 'none')}`"
        f" · digest `{candidate.checkpoint_digest or 'none'}`",
        f"*Eval results* {evals}",
        f"*Eval contract* `{candidate.eval_contract_hash or 'none'}`",
        f"*Pins* {pins}",
        f"*Artifacts* {', '.join(candidate.artifacts) or 'none'}",
    ]
    passed = sum(r.passed for r in results)
    criteria_lines = [
        f"{':white_check_mark:' if r.passed else ':x:'} *{escape(r.name)}* — {r.evidence}" for r in results
    ]
    label = f"{model}:{version}" if version else f"{model} (next version)"
    self_rule = f"<@{requester}>" + (f" and <@{run_requester}>" if run_requester != requester else "")
    return [
        header(f"Approval request: register {label}"),
        section("\n".join(candidate_lines)),
        section(
            f"*Criteria* ({escape(criteria_label)}: {passed}/{len(results)} pass; failing criteria are shown, "
            "not blocking)\n" + "\n".join(criteria_lines)
        ),
        context(
            f"Requested by <@{requester}>. {quorum} approval(s) needed: react with :{reaction}: on *this* message "
            f"(approvers only; not {self_rule}). Removing the reaction before registration revokes it. "
            f"Expires {expires_at:%Y-%m-%d %H:%M} UTC. Candidate digest `{candidate.digest()[:12]}`."
        ),
    ]
