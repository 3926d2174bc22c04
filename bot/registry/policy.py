"""Approval policy, pure: registration criteria with evidence, and what one reaction means for a request.

Registration records a selection; it is not a quality check. Criteria are shown and recorded (failing ones
do not block the request); the human decision is bound to exactly one candidate by its digest.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, Field, ValidationError

from bot.catalog.yamlfile import safe_load
from bot.slack.blocks import escape, mention


class CriteriaError(Exception):
    """A criteria file is malformed; the message names the file and field."""


class Threshold(BaseModel):
    """Bounds on one eval metric (inclusive)."""

    min: float | None = None
    max: float | None = None


class Comparison(BaseModel):
    """Compare with the currently registered version, only when both share one eval contract."""

    metric: str = "eval_loss"
    greater_is_better: bool = False
    tolerance: float = Field(default=0.0, ge=0, description="allowed regression, absolute")


class Criteria(BaseModel):
    """A versioned criteria file: `manifests/criteria/<model>.yaml` or `default.yaml`."""

    version: str
    description: str = ""
    required_artifacts: list[str] = Field(default_factory=lambda: ["checkpoint", "eval_results"])
    thresholds: dict[str, Threshold] = Field(default_factory=dict)
    compare_with_current: Comparison | None = None
    source: str = ""


class Candidate(BaseModel):
    """What would be registered: one run's checkpoint and eval results."""

    run_uuid: str
    run_name: str
    checkpoint_path: str | None = None
    checkpoint_digest: str | None = None
    artifacts: list[str] = Field(default_factory=list)
    eval_results: dict[str, float] = Field(default_factory=dict)
    # The metrics of `eval_results` that an evaluation run measured (bot.registry.evidence): metric -> its name.
    evidence: dict[str, str] = Field(default_factory=dict)
    eval_contract_hash: str = ""
    pins: dict[str, Any] = Field(default_factory=dict)

    def digest(self) -> str:
        """Binds approvals to this exact candidate: a new checkpoint or re-evaluation changes it."""
        payload: dict[str, Any] = {
            "run": self.run_uuid,
            "checkpoint": self.checkpoint_path,
            "checkpoint_digest": self.checkpoint_digest,
            "eval_results": self.eval_results,
            "eval_contract_hash": self.eval_contract_hash,
        }
        if self.evidence:  # only then: candidates recorded before evaluations existed keep their digest
            payload["evidence"] = self.evidence
        return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


class CurrentVersion(BaseModel):
    """The version registered now for the model, if any."""

    version: str
    eval_results: dict[str, float] = Field(default_factory=dict)
    eval_contract_hash: str = ""


class CriterionResult(BaseModel):
    """One criterion, pass or fail, with its evidence."""

    name: str
    passed: bool
    evidence: str


def criteria_path(criteria_dir: Path, model: str) -> Path:
    """The model's own criteria file, else `default.yaml`."""
    path = criteria_dir / f"{model}.yaml"
    if not path.is_file():
        path = criteria_dir / "default.yaml"
    if not path.is_file():
        raise CriteriaError(f"no criteria for {model!r}: {criteria_dir}/default.yaml is missing")
    return path


def load_criteria(criteria_dir: Path, model: str) -> Criteria:
    """The model's own criteria file, else `default.yaml` (its registration criteria)."""
    path = criteria_path(criteria_dir, model)
    try:
        raw = safe_load(path.read_text())
        return Criteria.model_validate({**(raw or {}), "source": path.name})
    except (yaml.YAMLError, ValidationError) as exc:
        raise CriteriaError(f"{path}: {exc}") from exc


def evaluate_criteria(
    criteria: Criteria, candidate: Candidate, current: CurrentVersion | None
) -> list[CriterionResult]:
    """Every criterion with pass/fail and the evidence it was judged on."""
    results: list[CriterionResult] = []
    for name in criteria.required_artifacts:
        present = name in candidate.artifacts
        evidence = (
            f"`{name}` present"
            if present
            else f"`{name}` missing (run has: {', '.join(candidate.artifacts) or 'none'})"
        )
        if name == "checkpoint" and present and candidate.checkpoint_path:
            evidence += f" at `{candidate.checkpoint_path}`"
        results.append(CriterionResult(name=f"artifact {name}", passed=present, evidence=evidence))
    for metric, bound in sorted(criteria.thresholds.items()):
        value = candidate.eval_results.get(metric)
        wanted = " and ".join(
            part
            for part in (
                f">= {bound.min:g}" if bound.min is not None else "",
                f"<= {bound.max:g}" if bound.max is not None else "",
            )
            if part
        )
        if value is None:
            results.append(
                CriterionResult(
                    name=f"{metric} {wanted}", passed=False, evidence=f"{metric} is not in the eval results"
                )
            )
            continue
        ok = (bound.min is None or value >= bound.min) and (bound.max is None or value <= bound.max)
        source = candidate.evidence.get(metric)
        shown = f"{metric} = {value:.6g}" + (f" (evaluation `{source}`)" if source else "")
        results.append(CriterionResult(name=f"{metric} {wanted}", passed=ok, evidence=shown))
    cmp = criteria.compare_with_current
    if cmp is not None:
        results.append(_compare(cmp, candidate, current))
    return results


def _compare(cmp: Comparison, candidate: Candidate, current: CurrentVersion | None) -> CriterionResult:
    direction = "higher" if cmp.greater_is_better else "lower"
    name = f"{cmp.metric} no worse than the registered version"
    if current is None:
        return CriterionResult(name=name, passed=True, evidence="no version is registered yet")
    if current.eval_contract_hash != candidate.eval_contract_hash:
        return CriterionResult(
            name=name,
            passed=False,
            evidence=(
                f"not comparable: {current.version} was evaluated on contract `{current.eval_contract_hash[:12]}`, "
                f"the candidate on `{candidate.eval_contract_hash[:12]}`"
            ),
        )
    new, old = candidate.eval_results.get(cmp.metric), current.eval_results.get(cmp.metric)
    if new is None or old is None:
        return CriterionResult(
            name=name, passed=False, evidence=f"{cmp.metric} missing for candidate or {current.version}"
        )
    delta = new - old if cmp.greater_is_better else old - new
    ok = delta >= -cmp.tolerance
    return CriterionResult(
        name=name,
        passed=ok,
        evidence=f"{cmp.metric} {new:.6g} vs {old:.6g} in {current.version} ({direction} is better)",
    )


# --- reactions ----------------------------------------------------------------------------------

Code = Literal[
    "counts",
    "revokes",
    "duplicate",
    "wrong_emoji",
    "wrong_message",
    "not_approver",
    "self_approval",
    "expired",
    "voided",
    "closed",
    "not_approved",
]


class RequestView(BaseModel):
    """What a reaction is judged against."""

    status: Literal["open", "registered", "voided", "expired", "registering", "granted"]
    requester: str
    run_requester: str
    expires_at: datetime | None = None
    candidate_digest: str
    current_digest: str | None = None  # the candidate's digest now, when known
    reissue: str = "`/finetune register`"  # the command that asks again (a preflight skip: its `run`)
    subject: str = "the candidate"  # what a change of voids the request (a preflight skip: the held run)
    # Why a voided request was voided when it was not its subject changing (its held run was cancelled).
    voided_because: str | None = None


class Verdict(BaseModel):
    """What to do with one reaction: count it, revoke, or ignore it (and tell the user why, once)."""

    code: Code
    counts: bool = False
    reason: str | None = None  # shown once in the thread when set


def judge_reaction(
    *,
    added: bool,
    request: RequestView | None,
    on_request_message: bool,
    user: str,
    reaction: str,
    approval_reaction: str,
    approvers: set[str],
    already_approved: set[str],
    now: datetime,
) -> Verdict:
    """The verdict for one reaction_added/reaction_removed on a message related to an approval request."""
    if reaction != approval_reaction:
        if added and on_request_message:
            return Verdict(
                code="wrong_emoji",
                reason=f"only :{approval_reaction}: approves; {mention(user)}'s :{escape(reaction)}: is not counted",
            )
        return Verdict(code="wrong_emoji")
    if request is None or not on_request_message:
        return Verdict(
            code="wrong_message",
            reason=f"{mention(user)}: approvals count only as :{approval_reaction}: on the approval request message"
            if added
            else None,
        )
    if not added:
        if request.status != "open":
            return Verdict(code="closed")
        return Verdict(code="revokes") if user in already_approved else Verdict(code="not_approved")
    if request.status in ("registered", "registering", "granted"):
        return Verdict(code="closed")
    if request.status == "voided" or (request.current_digest and request.current_digest != request.candidate_digest):
        return Verdict(
            code="voided",
            reason=f"this request was voided: "
            f"{request.voided_because or f'{request.subject} changed after it was made'}; re-issue {request.reissue}",
        )
    if request.status == "expired" or (request.expires_at is not None and request.expires_at <= now):
        return Verdict(code="expired", reason=f"this request has expired; re-issue {request.reissue}")
    if user in (request.requester, request.run_requester):
        whose = "their own request" if user == request.requester else "a run they started"
        return Verdict(code="self_approval", reason=f"{mention(user)} can't approve {whose}")
    if user not in approvers:
        return Verdict(code="not_approver", reason=f"{mention(user)} is not an approver (see FINETUNE_APPROVERS)")
    if user in already_approved:
        return Verdict(code="duplicate")
    return Verdict(code="counts", counts=True)
