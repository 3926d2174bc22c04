"""Evaluations as evidence (issue 37): which of a run's evaluations count, and what they add to its candidate."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from bot.registry.evidence import confirmed_evaluations, evaluation_metrics, with_evaluations
from storage.db import SessionFactory
from tests.fixtures.runs import create_run

CONTRACT = {"harness": "lm-eval", "metrics": ["tiny_capitals-acc", "tiny_arith-exact_match"]}
NOW = datetime(2026, 12, 6, 12, 0, tzinfo=UTC)


class Gateway:
    """Each run's outputs, as Polyaxon would list them."""

    def __init__(self, outputs: dict[str, dict[str, Any]]) -> None:
        self.outputs = outputs

    def get_run(self, uuid: str, *, with_conditions: bool = True) -> SimpleNamespace:
        return SimpleNamespace(outputs=self.outputs[uuid])


def evaluation(s: Any, name: str, parent: int, **fields: Any) -> Any:
    defaults: dict[str, Any] = {
        "kind": "eval",
        "parent_run_id": parent,
        "status": "succeeded",
        "polyaxon_uuid": name,
        "eval_contract": CONTRACT,
        "outputs_check": {"confirmed": True},
        "outputs_confirmed_at": NOW,
    }
    return create_run(s, name, **{**defaults, **fields})


def test_confirmed_evaluations_add_the_metrics_the_run_lacks_newest_first(sessions: SessionFactory) -> None:
    with sessions() as s:
        run = create_run(s, "sft-tiny-1", status="succeeded", polyaxon_uuid="u-run")
        evaluation(s, "old", run.id)
        evaluation(s, "unconfirmed", run.id, outputs_check={"confirmed": False}, outputs_confirmed_at=None)
        evaluation(s, "failed", run.id, status="failed")
        other = create_run(s, "sft-tiny-2", status="succeeded", polyaxon_uuid="u-other")
        evaluation(s, "of-another-run", other.id)
        evaluation(s, "new", run.id)
        s.commit()
    gateway = Gateway(
        {
            "old": {"eval_contract_hash": "h", "tiny_capitals-acc": 0.25, "tiny_arith-exact_match": 0.5},
            "new": {"eval_contract_hash": "h", "tiny_capitals-acc": 0.5},
        }
    )
    deps: Any = SimpleNamespace(runs=SimpleNamespace(sessions=sessions), gateway=gateway)
    assert [r.name for r in confirmed_evaluations(deps, run)] == ["new", "old"]
    results, evidence = with_evaluations(deps, run, {"eval_loss": 2.0, "tiny_capitals-acc": 0.9})
    # The run's own value stays; the newest evaluation's comes before an older one's.
    assert results == {"eval_loss": 2.0, "tiny_capitals-acc": 0.9, "tiny_arith-exact_match": 0.5}
    assert evidence == {"tiny_arith-exact_match": "old"}
    results, evidence = with_evaluations(deps, run, {})
    assert results == {"tiny_capitals-acc": 0.5, "tiny_arith-exact_match": 0.5}
    assert evidence == {"tiny_capitals-acc": "new", "tiny_arith-exact_match": "old"}


def test_an_evaluation_counts_only_its_final_contract_metrics() -> None:
    assert evaluation_metrics({"tiny_capitals-acc": 0.5}, CONTRACT) == {}, "no contract hash: not a final evaluation"
    outputs = {"eval_contract_hash": "h", "tiny_capitals-acc": 0.5, "loss": 1.0, "tiny_arith-exact_match": "n/a"}
    assert evaluation_metrics(outputs, CONTRACT) == {"tiny_capitals-acc": 0.5}
