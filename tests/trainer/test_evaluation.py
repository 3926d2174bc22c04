"""The eval contract: canonical hash (recomputed here independently), validation, pinned hash."""

from __future__ import annotations

import hashlib
import json
from dataclasses import replace
from typing import Any

import pytest

from trainer.config import EvalArguments
from trainer.evaluation import (
    PROCEDURE_METRICS,
    EvalContract,
    EvalContractError,
    best_metric,
    check_contract_fits,
    contract_from_args,
    contract_hash,
    report_metrics,
)

CONTRACT = EvalContract(
    dataset="manifests/datasets/tiny-chat",
    revision="main",
    split="eval",
    max_samples=16,
    metrics=("eval_perplexity", "eval_loss"),
    procedure_version="v1",
    seed=0,
)


def test_hash_is_sha256_of_canonical_json() -> None:
    payload = (
        '{"dataset":"manifests/datasets/tiny-chat","max_samples":16,"metrics":["eval_loss","eval_perplexity"],'
        '"procedure_version":"v1","revision":"main","seed":0,"split":"eval"}'
    )
    expected = "sha256:" + hashlib.sha256(payload.encode()).hexdigest()
    assert contract_hash(CONTRACT.fields()) == expected


def test_metric_order_and_duplicates_do_not_change_the_hash() -> None:
    other = replace(CONTRACT, metrics=("eval_loss", "eval_perplexity", "eval_loss"))
    assert contract_hash(other.fields()) == contract_hash(CONTRACT.fields())


@pytest.mark.parametrize(
    "change",
    [
        {"dataset": "other"},
        {"revision": "abc"},
        {"split": "test"},
        {"max_samples": 0},
        {"metrics": ("eval_loss",)},
        {"procedure_version": "v2"},
        {"seed": 1},
    ],
    ids=lambda c: next(iter(c)),
)
def test_every_field_changes_the_hash(change: dict[str, Any]) -> None:
    assert contract_hash(replace(CONTRACT, **change).fields()) != contract_hash(CONTRACT.fields())


def _eval_args(**kwargs: Any) -> EvalArguments:
    base = {"eval_dataset_name": "manifests/datasets/tiny-chat", "eval_max_samples": 16}
    return EvalArguments(**{**base, **kwargs})


def test_contract_from_args_accepts_its_own_hash() -> None:
    contract = contract_from_args(_eval_args())
    assert contract is not None
    pinned = contract_hash(contract.fields())
    assert contract_from_args(_eval_args(eval_contract_hash=pinned)) == contract
    assert contract_from_args(_eval_args(eval_contract_hash=pinned.removeprefix("sha256:"))) == contract


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"eval_contract_hash": "sha256:" + "0" * 64}, "the recipe pins"),
        ({"eval_metrics": "eval_loss,bleu"}, "unknown eval metrics"),
        ({"eval_metrics": " , "}, "names no metrics"),
        ({"eval_procedure_version": "v9"}, "unknown eval procedure"),
        ({"eval_max_samples": -1}, ">= 0"),
    ],
    ids=["pinned-hash-differs", "unknown-metric", "no-metrics", "unknown-procedure", "negative-samples"],
)
def test_bad_contracts_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(EvalContractError, match=message):
        contract_from_args(_eval_args(**kwargs))


def test_no_eval_dataset_means_no_contract() -> None:
    assert contract_from_args(EvalArguments()) is None


def test_report_metrics_derives_perplexity() -> None:
    metrics = report_metrics({"eval_loss": 2.0, "eval_runtime": 1.0}, CONTRACT)
    assert metrics == {"eval_perplexity": pytest.approx(7.389056), "eval_loss": 2.0}
    assert json.dumps(metrics)


@pytest.mark.parametrize(
    ("procedure", "metrics"),
    [
        ("pref-v1", "eval_preference_accuracy,eval_reward_margin"),
        ("reward-v1", "eval_pairwise_accuracy,eval_reward_margin"),
        ("gen-v1", "eval_mean_reward,eval_reward_format,eval_reward_length,eval_reward_exact_match"),
    ],
)
def test_each_procedure_takes_its_own_metrics(procedure: str, metrics: str) -> None:
    contract = contract_from_args(_eval_args(eval_procedure_version=procedure, eval_metrics=metrics))
    assert contract is not None and set(contract.metrics) == set(metrics.split(","))
    assert set(contract.metrics) <= set(PROCEDURE_METRICS[procedure])


@pytest.mark.parametrize(
    ("procedure", "metrics"),
    [("v1", "eval_preference_accuracy"), ("pref-v1", "eval_loss"), ("reward-v1", "eval_preference_accuracy")],
    ids=["v1-pref-metric", "pref-v1-loss", "reward-v1-pref-metric"],
)
def test_a_metric_of_another_procedure_is_refused(procedure: str, metrics: str) -> None:
    with pytest.raises(EvalContractError, match=f"unknown eval metrics .* for procedure {procedure}"):
        contract_from_args(_eval_args(eval_procedure_version=procedure, eval_metrics=metrics))


def test_a_contract_fits_its_trainers_procedure_and_reward_functions() -> None:
    gen = replace(CONTRACT, procedure_version="gen-v1", metrics=("eval_mean_reward", "eval_reward_exact_match"))
    check_contract_fits(gen, "grpo", "gen-v1", ("exact-match", "format"))
    with pytest.raises(EvalContractError, match=r"\['eval_reward_exact_match'\] score reward functions"):
        check_contract_fits(gen, "grpo", "gen-v1", ("format",))
    with pytest.raises(
        EvalContractError, match="--trainer dpo is evaluated by procedure pref-v1; the contract names v1"
    ):
        check_contract_fits(CONTRACT, "dpo", "pref-v1", ())


def test_preference_and_reward_metrics_rank_higher_as_better() -> None:
    for name in ("eval_preference_accuracy", "eval_reward_margin", "eval_pairwise_accuracy", "eval_mean_reward"):
        assert best_metric(replace(CONTRACT, metrics=(name,))) == (name, True)
