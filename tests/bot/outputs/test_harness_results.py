"""A harness suite's results checked against the contract the run was submitted with (issue 37)."""

from __future__ import annotations

from typing import Any

from bot.outputs.harness import harness_problems

TASK = {"name": "tiny_capitals", "version": "1.0", "digest": "sha256:" + "c" * 64}
CONTRACT: dict[str, Any] = {
    "harness": "lm-eval",
    "harness_version": "0.4.13",
    "tasks": [TASK],
    "metrics": ["tiny_capitals-acc"],
}


def results(**changes: Any) -> dict[str, Any]:
    task = {"version": "1.0", "digest": TASK["digest"], "hash": "abc", "num_fewshot": 0, "limit": 0, "n_samples": 12}
    document: dict[str, Any] = {
        "metrics": {"tiny_capitals-acc": 0.5},
        "harness": {"name": "lm-eval", "version": "0.4.13", "tasks": {"tiny_capitals": {**task, **changes}}},
    }
    return document


def test_results_that_match_their_contract_have_no_problem() -> None:
    assert harness_problems(results(), CONTRACT) == []
    assert harness_problems({"metrics": {}}, {"metrics": ["eval_loss"]}) == [], "not a harness contract"


def test_each_mismatch_is_named() -> None:
    assert harness_problems({"metrics": {}}, CONTRACT) == [
        "no `harness` section although the contract is a harness suite"
    ]
    assert harness_problems(results(version="2.0"), CONTRACT) == [
        "task tiny_capitals ran at version 2.0, the contract pins 1.0"
    ]
    assert harness_problems(results(digest="sha256:x"), CONTRACT) == [
        "task tiny_capitals's data digest differs from the contract's"
    ]
    assert harness_problems(results(hash=""), CONTRACT) == ["task tiny_capitals has no task hash"]
    wrong = results()
    wrong["harness"]["version"] = "0.4.12"
    wrong["metrics"] = {}
    assert harness_problems(wrong, CONTRACT) == [
        "lm-eval 0.4.12 ran, the contract pins 0.4.13",
        "metrics missing: tiny_capitals-acc",
    ]
    extra = results()
    extra["harness"]["tasks"]["other"] = {"hash": "x"}
    assert harness_problems(extra, CONTRACT) == ["tasks outside the contract: other"]
