"""Release policy, pure: stage rules from the criteria file, a serving report's verdict, who holds a stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bot.registry.policy import CriteriaError
from bot.release.policy import (
    Change,
    PromotionRules,
    StageRule,
    judge_serving_report,
    latency_only,
    load_promotion_rules,
    promotion_digest,
    refuse_promotion,
    stage_holders,
)
from bot.release.render import render_serving_report

ROOT = Path(__file__).resolve().parents[3]
DIGEST = "sha256:" + "a" * 64


def report(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "error": None,
        "prompt_set": {"digest": DIGEST, "count": 2},
        "chat_template": {"applied": True, "digest": "sha256:" + "b" * 64},
        "prompts": [{"id": "a", "passed": True}, {"id": "b", "passed": True}],
        "expectations_passed": True,
        "failures": [],
        "load_time_s": 2.0,
        "peak_memory_mb": 400.0,
        "tokens_per_s": 200.0,
        "latency_ms": {"p50": 30.0, "p95": 50.0, "max": 60.0},
    }
    return {**base, **over}


def verdict(rep: dict[str, Any], budgets: dict[str, float | None] | None = None, status: str = "succeeded") -> dict:
    results = judge_serving_report(rep, budgets or {}, run_status=status, prompt_set_digest=DIGEST)
    return {r.name: (r.passed, r.evidence) for r in results}


def test_a_clean_report_within_budgets_passes_every_criterion() -> None:
    got = verdict(report(), {"latency_p95_ms": 100, "peak_memory_mb": 1024, "min_tokens_per_s": 50})
    assert all(passed for passed, _ in got.values()), got
    assert got["latency p95 (ms) <= 100"] == (True, "50")
    assert got["tokens/s >= 50"] == (True, "200")
    assert "every prompt's expectations" in got and got["every prompt's expectations"][1] == "2/2 prompts pass"


def test_a_blown_budget_and_an_unmet_expectation_fail_with_their_evidence() -> None:
    bad = report(
        prompts=[{"id": "a", "passed": True}, {"id": "b", "passed": False}],
        expectations_passed=False,
        failures=["b: exact: expected 'Cairo', got 'Paris'"],
    )
    got = verdict(bad, {"latency_p95_ms": 10, "max_load_time_s": 5})
    assert got["latency p95 (ms) <= 10"] == (False, "50")
    assert got["load time (s) <= 5"] == (True, "2")
    passed, evidence = got["every prompt's expectations"]
    assert not passed and evidence.startswith("1/2 prompts pass") and "expected 'Cairo'" in evidence


def test_a_check_that_did_not_run_fails_and_unmeasured_budgets_fail() -> None:
    got = verdict({"error": "checkpoint x is not a folder"}, {"peak_memory_mb": 100}, status="failed")
    assert got["the check ran"] == (False, "run failed: checkpoint x is not a folder")
    assert got["peak memory (MB) <= 100"] == (False, "not measured")
    assert got["every prompt's expectations"][0] is False


def test_another_prompt_set_or_no_chat_template_fails() -> None:
    got = verdict(report(prompt_set={"digest": "sha256:" + "c" * 64}, chat_template={"applied": False}))
    assert got["the pinned prompt set"][0] is False and "pinned" in got["the pinned prompt set"][1]
    assert got["chat template applied as in training"] == (False, "not applied")


def test_promotion_rules_come_from_the_criteria_file_with_defaults(tmp_path: Path) -> None:
    shipped = load_promotion_rules(ROOT / "manifests" / "criteria", "tiny-chat")
    assert (shipped.staging.quorum, shipped.production.quorum) == (1, 2)
    assert shipped.production.from_stages == ["staging"] and shipped.source.startswith("tiny-chat.yaml@")
    (tmp_path / "default.yaml").write_text("version: '1'\n")
    defaults = load_promotion_rules(tmp_path, "m")
    assert defaults == PromotionRules(source="default.yaml@1")
    (tmp_path / "bad.yaml").write_text("version: '2'\npromotion: {production: {quorum: 0, from_stages: [staging]}}\n")
    with pytest.raises(CriteriaError, match="quorum"):
        load_promotion_rules(tmp_path, "bad")
    (tmp_path / "typo.yaml").write_text("version: '2'\npromotion: {prod: {quorum: 1, from_stages: [staging]}}\n")
    with pytest.raises(CriteriaError, match="prod"):
        load_promotion_rules(tmp_path, "typo")


def test_refusals_say_where_the_version_is_and_where_it_may_come_from() -> None:
    production = StageRule(quorum=2, from_stages=["staging"])
    assert refuse_promotion(label="`m:v1`", current="testing", target="production", rule=production) == (
        "`m:v1` is in `testing`: production takes a version from `staging` only (promote it to `staging` first)"
    )
    assert refuse_promotion(label="`m:v1`", current="production", target="production", rule=production) == (
        "`m:v1` is in production already"
    )
    assert refuse_promotion(label="`m:v1`", current="staging", target="production", rule=production) is None


def change(version: str, frm: str, to: str, kind: str) -> Change:
    return Change(version=version, from_stage=frm, to_stage=to, kind=kind)


def test_stage_holders_follow_promotions_supersessions_and_rollbacks() -> None:
    history = [
        change("v1", "testing", "staging", "promote"),
        change("v1", "staging", "production", "promote"),
        change("v2", "testing", "staging", "promote"),
        change("v2", "staging", "production", "promote"),
        change("v1", "production", "disabled", "superseded"),
    ]
    assert stage_holders(history, "production") == ["v1", "v2"]
    assert stage_holders(history, "staging") == [], "promoted on from staging: no longer its holder"
    rolled = [
        *history,
        change("v1", "disabled", "production", "rollback"),
        change("v2", "production", "disabled", "rolled_back"),
    ]
    assert stage_holders(rolled, "production") == ["v1"], "a rolled-back version is not restored again"
    again = [*rolled, change("v3", "staging", "production", "promote")]
    assert stage_holders(again, "production") == ["v1", "v3"]


def test_the_promotion_digest_changes_with_what_the_approvals_are_for() -> None:
    base = {
        "polyaxon_version": "m-v1",
        "run_uuid": "u",
        "artifacts": ["model", "eval"],
        "stage": "staging",
        "from_stage": "testing",
        "check": "1:sha256:x:passed",
    }
    digest = promotion_digest(**base)
    assert promotion_digest(**{**base, "artifacts": ["eval", "model"]}) == digest, "order does not matter"
    for key, value in (("from_stage", "disabled"), ("check", "2:sha256:x:passed"), ("artifacts", ["model"])):
        assert promotion_digest(**{**base, key: value}) != digest, key
    # A stage's metric thresholds bind the approvals to the values judged and the evaluation that measured them.
    assert promotion_digest(**base, metrics={}) == digest, "no thresholds: the digest is as before"
    judged = {"values": {"tiny_capitals-acc": 0.75}, "evidence": {"tiny_capitals-acc": "sft-tiny-eval-1"}}
    with_metrics = promotion_digest(**base, metrics=judged)
    assert with_metrics != digest
    other = {"values": {"tiny_capitals-acc": 0.75}, "evidence": {"tiny_capitals-acc": "sft-tiny-eval-2"}}
    assert promotion_digest(**base, metrics=other) != with_metrics


BUSY = {"p50": 900.0, "p95": 2688.0, "max": 2688.0}  # a busy machine's first measure (the numbers)


def test_a_latency_budget_missed_once_is_judged_on_the_re_measure() -> None:
    quiet = report(latency_ms=BUSY, latency_remeasured_ms={"p50": 410.0, "p95": 579.0, "max": 579.0})
    got = verdict(quiet, {"latency_p95_ms": 2000})
    assert got["latency p95 (ms) <= 2000"] == (True, "2688 measured, 579 re-measured")
    busy = report(latency_ms=BUSY, latency_remeasured_ms={"p50": 1500.0, "p95": 2301.0, "max": 2301.0})
    assert verdict(busy, {"latency_p95_ms": 2000})["latency p95 (ms) <= 2000"] == (
        False,
        "2688 measured, 2301 re-measured",
    )
    # A report from before the re-measure (or a serving image that does not take one) is judged on its one measure.
    assert verdict(report(latency_ms=BUSY), {"latency_p95_ms": 2000})["latency p95 (ms) <= 2000"] == (False, "2688")


def test_the_advice_matches_the_failure() -> None:
    busy = report(latency_ms=BUSY, latency_remeasured_ms={"p50": 1500.0, "p95": 2301.0, "max": 2301.0})
    results = judge_serving_report(busy, {"latency_p95_ms": 2000}, run_status="succeeded", prompt_set_digest=DIGEST)
    assert latency_only(results)
    text, blocks = render_serving_report(busy, results, label="tiny-chat:v3", check_id=7, stage="staging", run_name="r")
    assert "blocked by latency alone" in text and "nothing to fix in it" in text
    assert "`/finetune promote tiny-chat:v3 stage=staging`" in text and "quieter node" in text
    assert "serving.budgets" in text and "register the new version" not in text
    assert "blocked by latency alone" in str(blocks[-1])

    wrong = report(latency_ms=BUSY, prompts=[{"id": "a", "passed": False}], expectations_passed=False)
    results = judge_serving_report(wrong, {"latency_p95_ms": 2000}, run_status="succeeded", prompt_set_digest=DIGEST)
    assert not latency_only(results)
    text, _ = render_serving_report(wrong, results, label="tiny-chat:v3", check_id=8, stage="staging", run_name="r")
    assert "fix the model or the serving setup, register the new version" in text and "latency alone" not in text
