"""`/finetune promote MODEL:VERSION stage=S`: the rules checked, then the serving check started (or a passed one
reused); a passed check's approval request follows (bot.release.requests), and at the stage's quorum the stage
moves (bot.release.stages).

The request is registration's approval request (action `promote`): the same reactions, quorum, revocation,
expiry and audit (bot.registry).
"""

from __future__ import annotations

from bot.grammar import PromoteCommand
from bot.registry.deps import RegistryDeps
from bot.registry.policy import Candidate
from bot.registry.states import RequestStates
from bot.release.checks import ServingChecks
from bot.release.ledger import StageLedger
from bot.release.policy import refuse_promotion
from bot.release.requests import ACTION, PromotionRequests
from bot.runs import Reply, RunError
from bot.slack.blocks import escape, mention
from storage import repos
from storage.models import Registration, Run, ServingCheck


class Promoter:
    """Starts promotions, posts their approval requests, and moves the stage at quorum (exactly once)."""

    def __init__(
        self,
        deps: RegistryDeps,
        states: RequestStates,
        checks: ServingChecks,
        ledger: StageLedger,
        requests: PromotionRequests,
    ) -> None:
        self.deps = deps
        self.states = states
        self.checks = checks
        self.ledger = ledger
        self.requests = requests

    # --- the command ------------------------------------------------------------------------------

    def promote(self, cmd: PromoteCommand, *, user: str, channel: str, delivery_key: str) -> Reply:
        """Check the rules, then start (or reuse) the serving check; a passed one's request is posted at once."""
        runs = self.deps.runs
        if not runs.people.may_run(user):
            raise RunError(f"{mention(user)} may not start runs here, and a promotion starts one; ask FINETUNE_RUNNERS")
        registration, run = self.ledger.find_version(cmd.model, cmd.version)
        title = f"`{escape(cmd.model)}:{escape(cmd.version)}`"
        rules = self.requests.rules(cmd.model)
        remote = self.ledger.read_version(registration)
        refusal = refuse_promotion(label=title, current=remote.stage, target=cmd.stage, rule=rules.rule(cmd.stage))
        if refusal:
            raise RunError(refusal)
        self.refuse_below_thresholds(cmd.model, cmd.version, run, cmd.stage)
        with runs.sessions() as s:
            waiting = [
                r
                for r in repos.list_approval_requests(
                    s, statuses=["open", "approved", "promoting"], model=cmd.model, action=ACTION
                )
                if r.version == cmd.version and r.stage == cmd.stage
            ]
        now = runs.clock()
        for old in waiting:
            if old.status == "open" and old.expires_at is not None and old.expires_at <= now:
                self.states.expire(old, run)
                continue
            link = runs.thread.permalink(old.channel, old.message_ts)
            where = f"<{link}|the open request>" if link else "the open request"
            raise RunError(f"{title} already has a request to go to {escape(cmd.stage)}: react on {where}")
        if not rules.rule(cmd.stage).require_serving_check:
            self.requests.post(registration, run, None, stage=cmd.stage, requester=user)
            return Reply(text=f"Posted the approval request to promote {title} to {escape(cmd.stage)} in its thread.")
        checkpoint = self.checkpoint(registration)
        check, reused = self.checks.ensure(
            registration, run, checkpoint=checkpoint, stage=cmd.stage, user=user, delivery_key=delivery_key
        )
        with runs.sessions() as s:
            repos.add_audit(
                s,
                user=user,
                channel=channel,
                command=f"promote {cmd.model}:{cmd.version} stage={cmd.stage}",
                outcome="ok",
                detail=f"serving check {check.id} " + ("reused (passed)" if reused else "started"),
                run_id=run.id,
            )
        if reused:
            runs.thread.post_thread(
                run,
                f":recycle: Promotion of {title} to *{escape(cmd.stage)}* requested by {mention(user)}: reusing "
                "serving check "
                f"#{check.id}, which passed on {check.finished_at:%Y-%m-%d %H:%M} UTC with the same prompt set and "
                "serving spec.",
                purpose="serving_reused",
            )
            self.requests.post(registration, run, check, stage=cmd.stage, requester=user)
            return Reply(
                text=f"Serving check #{check.id} of {title} passed already; the approval request to promote it to "
                f"{escape(cmd.stage)} is in its thread."
            )
        link = runs.thread.permalink(run.channel, run.card_ts)
        where = f"<{link}|its thread>" if link else "its thread"
        return Reply(
            text=f"Started serving check #{check.id} of {title} in {where}: when it passes, the approval request to "
            f"promote it to {escape(cmd.stage)} follows there; when it fails, its evidence."
        )

    def refuse_below_thresholds(self, model: str, version: str, run: Run, stage: str) -> None:
        """A version below its stage's metric thresholds is refused before any serving check starts."""
        from bot.polyaxon import GatewayError, PolyaxonUnreachableError

        title = f"`{escape(model)}:{escape(version)}`"
        try:
            judged, _ = self.requests.metric_criteria(run, self.requests.rules(model).rule(stage))
        except PolyaxonUnreachableError:
            raise  # told as the outage it is, by the command's one answer to an outage
        except GatewayError as exc:
            raise RunError(
                f"Polyaxon is unreachable, so {title}'s metrics can't be read: {self.deps.redact(exc)}. "
                "Nothing was changed; try again."
            ) from exc
        failed = [r for r in judged if not r.passed]
        if failed:
            lines = "; ".join(f"{escape(r.name)} ({escape(r.evidence)})" for r in failed)
            raise RunError(
                f"{title} does not meet the {escape(stage)} thresholds: {lines}. An evaluation may supply a missing "
                f"metric: `/finetune eval {escape(model)}:{escape(version)} suite=NAME`, then `/finetune outputs` of it"
            )

    def checkpoint(self, registration: Registration) -> str:
        """Where the version's checkpoint is (the candidate approved at registration)."""
        with self.deps.runs.sessions() as s:
            request = (
                repos.get_approval_request(s, request_id=registration.request_id)
                if registration.request_id is not None
                else None
            )
        candidate = Candidate.model_validate(request.candidate) if request is not None and request.candidate else None
        if candidate is None or not candidate.checkpoint_path:
            raise RunError(
                f"`{escape(registration.model)}:{escape(registration.version)}` has no checkpoint path on record, so "
                "nothing can load "
                "it; register a run whose model artifact is logged"
            )
        return candidate.checkpoint_path

    def on_settled(self, check: ServingCheck) -> None:
        """A serving check ended: a passed one gets the approval request it was started for."""
        if check.status != "passed":
            return
        with self.deps.runs.sessions() as s:
            registration = s.get(Registration, check.registration_id)
            run = repos.get_run(s, run_id=registration.run_id) if registration is not None else None
        if registration is None or run is None:
            return
        try:
            self.requests.post(registration, run, check, stage=check.stage, requester=check.requester)
        except RunError as exc:  # the version moved meanwhile: say why no request follows
            self.deps.runs.thread.post_thread(
                run,
                f":information_source: Serving check #{check.id} passed, but no request to promote to "
                f"{escape(check.stage)} "
                f"follows: {exc.message}",
                purpose="promotion_refused",
            )
