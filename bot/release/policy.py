"""Release policy, pure: the stage rules of a model's criteria file, a serving report judged against the
recipe's budgets, who holds a stage and what a rollback restores.

A serving check is a gate, unlike registration's criteria: a failing one blocks the promotion request.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from bot.catalog.yamlfile import safe_load
from bot.registry.policy import CriteriaError, CriterionResult, Threshold, criteria_path
from bot.slack.blocks import escape

Stage = Literal["testing", "staging", "production", "disabled"]


class StageRule(BaseModel):
    """What moving a version into one stage takes."""

    model_config = ConfigDict(extra="forbid")

    quorum: int = Field(ge=1, le=10)
    from_stages: list[Stage] = Field(min_length=1, description="The stages a version may be promoted from")
    require_serving_check: bool = True
    # Metrics the version must reach to enter the stage: its run's own eval results, or those an evaluation of
    # it measured (`/finetune eval MODEL:VERSION`, bot.registry.evidence), judged as registration's thresholds.
    thresholds: dict[str, Threshold] = Field(default_factory=dict)


class PromotionRules(BaseModel):
    """The `promotion:` section of a model's criteria file (defaults: staging from testing by 1 approval,
    production only from staging by 2)."""

    model_config = ConfigDict(extra="forbid")

    staging: StageRule = Field(default_factory=lambda: StageRule(quorum=1, from_stages=["testing", "disabled"]))
    production: StageRule = Field(default_factory=lambda: StageRule(quorum=2, from_stages=["staging"]))
    source: str = ""

    def rule(self, stage: str) -> StageRule:
        """The rule of `staging` or `production`."""
        return self.production if stage == "production" else self.staging


def load_promotion_rules(criteria_dir: Path, model: str) -> PromotionRules:
    """The model's criteria file's `promotion:` section (or the defaults when it has none)."""
    path = criteria_path(criteria_dir, model)
    try:
        raw = safe_load(path.read_text()) or {}
        version = raw.get("version", "?")
        return PromotionRules.model_validate({**(raw.get("promotion") or {}), "source": f"{path.name}@{version}"})
    except (OSError, yaml.YAMLError, ValidationError, AttributeError) as exc:
        raise CriteriaError(f"{path} promotion: {exc}") from exc


def refuse_promotion(*, label: str, current: str | None, target: str, rule: StageRule) -> str | None:
    """Why `label` (mrkdwn, its values escaped by the caller) can't go from `current` to `target`, or None."""
    if current == target:
        return f"{label} is in {escape(target)} already"
    if current not in rule.from_stages:
        path = " or ".join(f"`{escape(s)}`" for s in rule.from_stages)
        hint = " (promote it to `staging` first)" if "staging" in rule.from_stages else ""
        return (
            f"{label} is in `{escape(current or 'no stage')}`: {escape(target)} takes a version from {path} only{hint}"
        )
    return None


# --- the serving check's verdict -------------------------------------------------------------------

# Latency is the one figure a busy node bends: the job measures it after a warm-up and then once more
# (`latency_remeasured_ms`), and a latency budget fails only when both measures miss it.
LATENCY_LABEL = "latency "
REMEASURED = {"latency_ms.p50": "latency_remeasured_ms.p50", "latency_ms.p95": "latency_remeasured_ms.p95"}

BUDGETS: tuple[tuple[str, str, str, str], ...] = (
    # (budget field, report path, comparison, label)
    ("latency_p50_ms", "latency_ms.p50", "max", "latency p50 (ms)"),
    ("latency_p95_ms", "latency_ms.p95", "max", "latency p95 (ms)"),
    ("peak_memory_mb", "peak_memory_mb", "max", "peak memory (MB)"),
    ("max_load_time_s", "load_time_s", "max", "load time (s)"),
    ("min_tokens_per_s", "tokens_per_s", "min", "tokens/s"),
)


def _figure(report: Mapping[str, Any], path: str) -> float | None:
    value: Any = report
    for part in path.split("."):
        value = value.get(part) if isinstance(value, Mapping) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def judge_serving_report(
    report: Mapping[str, Any], budgets: Mapping[str, float | None], *, run_status: str, prompt_set_digest: str
) -> list[CriterionResult]:
    """Every criterion of a serving check with its evidence: it ran, every expectation met, every budget met."""
    results: list[CriterionResult] = []
    error = report.get("error")
    ran = run_status == "succeeded" and not error
    results.append(
        CriterionResult(
            name="the check ran",
            passed=ran,
            evidence="loaded and answered every prompt"
            if ran
            else f"run {run_status}" + (f": {error}" if error else ""),
        )
    )
    used = (report.get("prompt_set") or {}).get("digest")
    results.append(
        CriterionResult(
            name="the pinned prompt set",
            passed=used == prompt_set_digest,
            evidence=f"ran `{str(used)[:19]}`"
            + ("" if used == prompt_set_digest else f", pinned `{prompt_set_digest[:19]}`"),
        )
    )
    template = report.get("chat_template") or {}
    results.append(
        CriterionResult(
            name="chat template applied as in training",
            passed=bool(template.get("applied")),
            evidence=f"template `{str(template.get('digest') or '—')[:19]}`"
            if template.get("applied")
            else "not applied",
        )
    )
    prompts = [p for p in report.get("prompts") or [] if isinstance(p, Mapping)]
    failed = [str(p.get("id")) for p in prompts if not p.get("passed")]
    expectations_ok = bool(prompts) and not failed and bool(report.get("expectations_passed"))
    failures = [str(f) for f in report.get("failures") or []]
    results.append(
        CriterionResult(
            name="every prompt's expectations",
            passed=expectations_ok,
            evidence=f"{len(prompts) - len(failed)}/{len(prompts)} prompts pass"
            + (": " + "; ".join(failures[:3]) if failures else ""),
        )
    )
    for field, path, kind, label in BUDGETS:
        bound = budgets.get(field)
        if bound is None:
            continue
        value = _figure(report, path)
        sign = "<=" if kind == "max" else ">="
        if value is None:
            results.append(CriterionResult(name=f"{label} {sign} {bound:g}", passed=False, evidence="not measured"))
            continue
        ok = value <= bound if kind == "max" else value >= bound
        evidence = f"{value:.4g}"
        again = _figure(report, REMEASURED[path]) if not ok and path in REMEASURED else None
        if again is not None:  # re-measured once before failing: the second measure decides
            ok = again <= bound
            evidence = f"{value:.4g} measured, {again:.4g} re-measured"
        results.append(CriterionResult(name=f"{label} {sign} {bound:g}", passed=ok, evidence=evidence))
    return results


def latency_only(results: Sequence[CriterionResult]) -> bool:
    """The check failed on latency budgets alone: the model loaded, answered as expected and fit its memory."""
    failed = [r for r in results if not r.passed]
    return bool(failed) and all(r.name.startswith(LATENCY_LABEL) for r in failed)


# --- who holds a stage --------------------------------------------------------------------------------


class Change(BaseModel):
    """A stage change as the holder computation needs it."""

    version: str
    from_stage: str
    to_stage: str
    kind: str  # promote, superseded, rollback, rolled_back


def stage_holders(changes: Sequence[Change], stage: str) -> list[str]:
    """The versions that held `stage`, oldest first; the last holds it now, the one before is what a rollback
    restores. A version rolled back out of it, or promoted on from it, leaves the list."""
    holders: list[str] = []
    for change in changes:
        if change.to_stage == stage and change.kind in ("promote", "rollback"):
            if change.version in holders:
                holders.remove(change.version)
            holders.append(change.version)
        elif change.from_stage == stage and change.kind in ("rolled_back", "promote") and change.version in holders:
            holders.remove(change.version)
    return holders


def promotion_digest(
    *,
    polyaxon_version: str,
    run_uuid: str,
    artifacts: Sequence[str],
    stage: str,
    from_stage: str | None,
    check: str,
    metrics: Mapping[str, Any] | None = None,
) -> str:
    """What a promotion approval is for: the version (its run and artifacts), where it stands, the passed check,
    and the metrics (with the evaluations that measured them) its stage's thresholds were judged on."""
    payload: dict[str, Any] = {
        "version": polyaxon_version,
        "run": run_uuid,
        "artifacts": sorted(artifacts),
        "stage": stage,
        "from": from_stage,
        "check": check,
    }
    if metrics:  # only then: the digests of promotions without thresholds stay as they were
        payload["metrics"] = dict(metrics)
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()
