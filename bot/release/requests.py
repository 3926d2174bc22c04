"""The promotion's approval request: posted with its explicit criteria and evidence, bound by a digest to the
version as it stands (its Polyaxon version, run and artifacts, its stage now, the serving check that passed).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from bot.registry.candidate import read_candidate
from bot.registry.deps import RegistryDeps
from bot.registry.policy import Criteria, CriteriaError, CriterionResult, evaluate_criteria
from bot.release.ledger import StageLedger
from bot.release.policy import (
    PromotionRules,
    StageRule,
    load_promotion_rules,
    promotion_digest,
    refuse_promotion,
)
from bot.release.render import render_promotion_request
from bot.runs import RunError
from bot.slack.blocks import escape
from storage import repos
from storage.models import ApprovalRequest, Registration, Run, ServingCheck

if TYPE_CHECKING:
    from bot.polyaxon import ModelVersion

log = logging.getLogger(__name__)

ACTION = "promote"


def reissue(request: ApprovalRequest) -> str:
    """The command that asks for the same promotion again."""
    return f"/finetune promote {request.model}:{request.version} stage={request.stage}"


def label(request: ApprovalRequest) -> str:
    """How texts name a promotion request."""
    return f"`{escape(request.model)}:{escape(str(request.version))}` → {escape(str(request.stage))}"


class PromotionRequests:
    """Posts promotion requests and reads back what they are bound to."""

    def __init__(self, deps: RegistryDeps, ledger: StageLedger) -> None:
        self.deps = deps
        self.ledger = ledger

    def rules(self, model: str) -> PromotionRules:
        """The model's promotion rules (RunError when its criteria file can't be read)."""
        try:
            return load_promotion_rules(self.deps.criteria_dir, model)
        except CriteriaError as exc:
            raise RunError(f"the promotion criteria can't be read: {escape(str(exc))}") from exc

    def post(
        self, registration: Registration, run: Run, check: ServingCheck | None, *, stage: str, requester: str
    ) -> ApprovalRequest:
        """Post the approval request for the version as it stands now, with its criteria and evidence."""
        runs, deps = self.deps.runs, self.deps
        title = f"`{escape(registration.model)}:{escape(registration.version)}`"
        rules = self.rules(registration.model)
        rule = rules.rule(stage)
        remote = self.ledger.read_version(registration)
        refusal = refuse_promotion(label=title, current=remote.stage, target=stage, rule=rule)
        if refusal:
            raise RunError(refusal)
        judged, metrics = self.metric_criteria(run, rule)
        digest = self.digest(registration, remote, stage=stage, check=check, metrics=metrics)
        results = self.criteria(check, rule.from_stages, remote.stage, stage=stage, quorum=rule.quorum) + judged
        now = runs.clock()
        expires_at = now + deps.ttl
        blocks = render_promotion_request(
            label=f"{registration.model}:{registration.version}",
            stage=stage,
            from_stage=remote.stage,
            report=check.report if check is not None else None,
            check_id=check.id if check is not None else None,
            results=results,
            rules_source=rules.source,
            requester=requester,
            reaction=deps.reaction,
            quorum=rule.quorum,
            expires_at=expires_at,
            digest=digest,
        )
        text = escape(f"Approval request: promote {registration.model}:{registration.version} to {stage}")
        ts = runs.thread.post_thread(run, text, purpose="approval_request", blocks=blocks, broadcast=True)
        with runs.sessions() as s:
            request = repos.create_approval_request(
                s,
                run_id=run.id,
                action=ACTION,
                model=registration.model,
                version=registration.version,
                stage=stage,
                requester=requester,
                channel=run.channel,
                message_ts=ts,
                thread_ts=run.thread_ts or ts,
                checkpoint_path=None,
                candidate_digest=digest,
                criteria=[r.model_dump() for r in results],
                criteria_version=rules.source,
                status="open",
                expires_at=expires_at,
                candidate={
                    "registration_id": registration.id,
                    "polyaxon_version": registration.polyaxon_version,
                    "from_stage": remote.stage,
                    "serving_check_id": check.id if check is not None else None,
                },
                quorum=rule.quorum,
            )
            repos.add_audit(
                s,
                user=requester,
                channel=run.channel,
                command=f"promote {registration.model}:{registration.version} stage={stage}",
                outcome="ok",
                detail=f"approval request {request.id}: {rule.quorum} approval(s) needed",
                run_id=run.id,
            )
        return request

    def criteria(
        self,
        check: ServingCheck | None,
        from_stages: Sequence[str],
        current: str | None,
        *,
        stage: str,
        quorum: int,
    ) -> list[CriterionResult]:
        """The promotion's explicit criteria, each with its evidence."""
        results = []
        if check is not None:
            verdict = [CriterionResult.model_validate(v) for v in check.verdict]
            budgets = [r for r in verdict if r.name[0].isalpha() and ("<=" in r.name or ">=" in r.name)]
            results.append(
                CriterionResult(
                    name="serving check passed",
                    passed=check.status == "passed",
                    evidence=f"#{check.id}: " + ", ".join(f"{r.name} {'ok' if r.passed else 'FAIL'}" for r in verdict),
                )
            )
            results.append(
                CriterionResult(
                    name="serving budgets met",
                    passed=all(r.passed for r in budgets),
                    evidence="; ".join(f"{r.name}: {r.evidence}" for r in budgets) or "the recipe sets no budgets",
                )
            )
        results.append(
            CriterionResult(
                name=f"{stage} only from {' or '.join(from_stages)}",
                passed=current in from_stages,
                evidence=f"now in `{current or 'no stage'}`",
            )
        )
        results.append(
            CriterionResult(
                name=f"quorum for {stage}", passed=True, evidence=f"{quorum} approval(s), not the requester's"
            )
        )
        return results

    def metric_criteria(self, run: Run, rule: StageRule) -> tuple[list[CriterionResult], dict[str, Any]]:
        """The stage's metric thresholds judged on the version's run and its confirmed evaluations, and the values
        (with the evaluation that measured each) the approvals are bound to; nothing without thresholds.
        GatewayError while Polyaxon is down."""
        if not rule.thresholds:
            return [], {}
        candidate, _ = read_candidate(self.deps, run)
        criteria = Criteria(version="promotion", required_artifacts=[], thresholds=rule.thresholds)
        results = evaluate_criteria(criteria, candidate, None)
        values = {m: candidate.eval_results.get(m) for m in sorted(rule.thresholds)}
        sources = {m: candidate.evidence[m] for m in values if m in candidate.evidence}
        return results, {"values": values, "evidence": sources}

    def digest(
        self,
        registration: Registration,
        remote: ModelVersion,
        *,
        stage: str,
        check: ServingCheck | None,
        metrics: dict[str, Any] | None = None,
    ) -> str:
        """What the approvals are bound to: the version as Polyaxon has it, where it stands, the passed check, the
        metrics its thresholds were judged on."""
        return promotion_digest(
            polyaxon_version=registration.polyaxon_version or "",
            run_uuid=remote.run_uuid or "",
            artifacts=remote.artifacts,
            stage=stage,
            from_stage=remote.stage,
            check=f"{check.id}:{check.spec_digest}:{check.status}" if check is not None else "none",
            metrics=metrics,
        )

    def fresh_digest(self, request: ApprovalRequest, run: Run) -> str | None:
        """The request's digest now (None while Polyaxon can't say: checked again before the stage moves)."""
        from bot.polyaxon import GatewayError

        registration, check = self.subject(request)
        if registration is None:
            return "sha256:gone"
        try:
            remote = self.ledger.gateway.get_model_version(registration.polyaxon_version or "")
            _, metrics = self.metric_criteria(run, self.rules(request.model).rule(request.stage or ""))
        except GatewayError as exc:
            log.warning("release: can't re-read %s: %s", registration.polyaxon_version, exc)
            return None
        except RunError as exc:  # the criteria file became unreadable: nothing can be judged now
            log.warning("release: %s", exc)
            return None
        return self.digest(registration, remote, stage=request.stage or "", check=check, metrics=metrics)

    def subject(self, request: ApprovalRequest) -> tuple[Registration | None, ServingCheck | None]:
        """The registration and serving check a promotion request is about."""
        candidate = request.candidate or {}
        with self.deps.runs.sessions() as s:
            registration = repos.get_registration(s, model=request.model, version=request.version or "")
            check_id = candidate.get("serving_check_id")
            check = repos.get_serving_check(s, check_id=int(check_id)) if check_id else None
        return registration, check
