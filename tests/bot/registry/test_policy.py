"""Approval policy: criteria with evidence, and the verdict for every kind of reaction."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.registry.policy import (
    Candidate,
    Criteria,
    CriteriaError,
    CurrentVersion,
    RequestView,
    Threshold,
    evaluate_criteria,
    judge_reaction,
    load_criteria,
)

ROOT = Path(__file__).resolve().parents[3]
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
CAND = Candidate(
    run_uuid="u1",
    run_name="sft-tiny-1",
    checkpoint_path="outputs/checkpoint-20",
    checkpoint_digest="c" * 64,
    artifacts=["checkpoint", "eval_results", "model"],
    eval_results={"eval_loss": 2.0},
    eval_contract_hash="e" * 64,
)


def test_shipped_criteria_load_and_default_is_the_fallback() -> None:
    own = load_criteria(ROOT / "manifests" / "criteria", "tiny-chat")
    assert own.source == "tiny-chat.yaml" and own.thresholds["eval_loss"].max == 8.0
    fallback = load_criteria(ROOT / "manifests" / "criteria", "some-other-model")
    assert fallback.source == "default.yaml" and fallback.version


def test_malformed_criteria_name_the_file(tmp_path: Path) -> None:
    (tmp_path / "default.yaml").write_text("version: 1\nthresholds: {eval_loss: {max: lots}}\n")
    with pytest.raises(CriteriaError, match=r"default\.yaml"):
        load_criteria(tmp_path, "m")
    with pytest.raises(CriteriaError, match=r"default\.yaml is missing"):
        load_criteria(tmp_path / "nope", "m")


CRIT = Criteria(
    version="1",
    thresholds={"eval_loss": Threshold(max=3.0), "eval_accuracy": Threshold(min=0.5)},
    compare_with_current={"metric": "eval_loss", "tolerance": 0.0},  # type: ignore[arg-type]
)


@pytest.mark.parametrize(
    ("candidate", "current", "expected"),
    [
        (
            CAND,
            None,
            {
                "artifact checkpoint": True,
                "artifact eval_results": True,
                "eval_loss <= 3": True,
                "eval_accuracy >= 0.5": False,
                "eval_loss no worse than the registered version": True,
            },
        ),
        (
            CAND.model_copy(update={"artifacts": ["model"]}),
            None,
            {"artifact checkpoint": False, "artifact eval_results": False},
        ),
        (CAND.model_copy(update={"eval_results": {"eval_loss": 3.5}}), None, {"eval_loss <= 3": False}),
        (
            CAND,
            CurrentVersion(version="v1", eval_results={"eval_loss": 2.5}, eval_contract_hash="e" * 64),
            {"eval_loss no worse than the registered version": True},
        ),
        (
            CAND,
            CurrentVersion(version="v1", eval_results={"eval_loss": 1.5}, eval_contract_hash="e" * 64),
            {"eval_loss no worse than the registered version": False},
        ),
        (
            CAND,
            CurrentVersion(version="v1", eval_results={"eval_loss": 9.0}, eval_contract_hash="f" * 64),
            {"eval_loss no worse than the registered version": False},
        ),
    ],
    ids=[
        "fresh",
        "missing-artifacts",
        "over-threshold",
        "better-than-current",
        "regresses",
        "other-contract-not-comparable",
    ],
)
def test_criteria(candidate: Candidate, current: CurrentVersion | None, expected: dict[str, bool]) -> None:
    results = {r.name: r for r in evaluate_criteria(CRIT, candidate, current)}
    for name, passed in expected.items():
        assert results[name].passed is passed, results[name].evidence
        assert results[name].evidence


def test_contract_mismatch_evidence_names_both_contracts() -> None:
    current = CurrentVersion(version="v1", eval_results={"eval_loss": 9.0}, eval_contract_hash="f" * 64)
    (cmp,) = [r for r in evaluate_criteria(CRIT, CAND, current) if "registered" in r.name]
    assert "not comparable" in cmp.evidence and "ffffffffffff" in cmp.evidence and "eeeeeeeeeeee" in cmp.evidence


def test_candidate_digest_changes_with_checkpoint_or_eval() -> None:
    assert CAND.digest() == CAND.model_copy().digest()
    assert CAND.digest() != CAND.model_copy(update={"checkpoint_digest": "d" * 64}).digest()
    assert CAND.digest() != CAND.model_copy(update={"eval_results": {"eval_loss": 1.9}}).digest()


def test_a_metric_an_evaluation_measured_is_judged_and_cited_and_binds_the_approvals() -> None:
    """Issue 37: `/finetune eval RUN` adds its suite's metrics to the run's candidate, naming itself as evidence."""
    evaluated = CAND.model_copy(
        update={
            "eval_results": {"eval_loss": 2.0, "tiny_capitals-acc": 0.75},
            "evidence": {"tiny_capitals-acc": "sft-tiny-eval-1a2b3c4d"},
        }
    )
    criteria = Criteria(
        version="1", source="t.yaml", required_artifacts=[], thresholds={"tiny_capitals-acc": Threshold(min=0.5)}
    )
    (result,) = evaluate_criteria(criteria, evaluated, None)
    assert result.passed and result.evidence == "tiny_capitals-acc = 0.75 (evaluation `sft-tiny-eval-1a2b3c4d`)"
    newer = evaluated.model_copy(update={"evidence": {"tiny_capitals-acc": "sft-tiny-eval-99999999"}})
    assert newer.digest() != evaluated.digest(), "approvals given on one evaluation do not carry to another"
    assert "evidence" not in CAND.model_dump(exclude_defaults=True), "older candidates keep their digest"


OPEN = RequestView(
    status="open",
    requester="U0ALICE01",
    run_requester="U0ALICE01",
    expires_at=NOW + timedelta(hours=1),
    candidate_digest="d1",
    current_digest="d1",
)
APPROVERS = {"U0BOB0001", "U0CAROL01"}


@pytest.mark.parametrize(
    ("kw", "code", "counts", "says"),
    [
        ({}, "counts", True, None),
        ({"user": "U0ALICE01"}, "self_approval", False, "<@U0ALICE01> can't approve their own request"),
        (
            {"request": OPEN.model_copy(update={"requester": "U0DAVE001"}), "user": "U0ALICE01"},
            "self_approval",
            False,
            "can't approve a run they started",
        ),
        ({"user": "U0EVE0001"}, "not_approver", False, "is not an approver"),
        ({"reaction": "thumbsup"}, "wrong_emoji", False, "only :white_check_mark: approves"),
        ({"on_request_message": False}, "wrong_message", False, "only as :white_check_mark: on the approval request"),
        ({"request": None, "on_request_message": False, "reaction": "thumbsup"}, "wrong_emoji", False, None),
        (
            {"request": OPEN.model_copy(update={"expires_at": NOW - timedelta(seconds=1)})},
            "expired",
            False,
            "has expired",
        ),
        ({"request": OPEN.model_copy(update={"current_digest": "d2"})}, "voided", False, "candidate changed"),
        ({"request": OPEN.model_copy(update={"status": "voided"})}, "voided", False, "voided"),
        ({"already_approved": {"U0BOB0001"}}, "duplicate", False, None),
        ({"request": OPEN.model_copy(update={"status": "registered"})}, "closed", False, None),
        ({"added": False, "already_approved": {"U0BOB0001"}}, "revokes", False, None),
        ({"added": False}, "not_approved", False, None),
        (
            {
                "added": False,
                "already_approved": {"U0BOB0001"},
                "request": OPEN.model_copy(update={"status": "registered"}),
            },
            "closed",
            False,
            None,
        ),
    ],
    ids=[
        "counts",
        "self",
        "run-requester",
        "non-approver",
        "wrong-emoji",
        "wrong-message",
        "unrelated-emoji",
        "expired",
        "candidate-changed",
        "voided",
        "duplicate",
        "after-registration",
        "removal-revokes",
        "removal-of-nothing",
        "removal-after-registration",
    ],
)
def test_judge_reaction(kw: dict[str, object], code: str, counts: bool, says: str | None) -> None:
    args: dict[str, object] = {
        "added": True,
        "request": OPEN,
        "on_request_message": True,
        "user": "U0BOB0001",
        "reaction": "white_check_mark",
        "approval_reaction": "white_check_mark",
        "approvers": APPROVERS,
        "already_approved": set(),
        "now": NOW,
    }
    args.update(kw)
    verdict = judge_reaction(**args)  # type: ignore[arg-type]
    assert verdict.code == code and verdict.counts is counts
    if says is None:
        assert verdict.reason is None
    else:
        assert verdict.reason is not None and says in verdict.reason
