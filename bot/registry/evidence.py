"""Evaluation runs as evidence: the metrics a run's confirmed evaluations (`/finetune eval RUN`) measured.

Registration and promotion criteria name metrics. A run's own eval contract measures some; an evaluation of its
final model on a harness suite measures others (or the same suite again). Each evaluation that succeeded and
whose outputs `outputs` confirmed adds the metrics of its contract that the run's own results lack, newest
evaluation first, and names itself as their evidence; the candidate's digest covers them, so a newer evaluation
voids approvals given on the older one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from storage import repos
from storage.models import Run

if TYPE_CHECKING:
    from bot.registry.deps import RegistryDeps


def confirmed_evaluations(deps: RegistryDeps, run: Run) -> list[Run]:
    """The run's evaluations that succeeded and whose outputs were confirmed, newest first."""
    with deps.runs.sessions() as s:
        children = repos.child_runs(s, parent_id=run.id or 0, kind="eval")
    return [
        child
        for child in children
        if child.status == "succeeded"
        and child.outputs_confirmed_at is not None
        and (child.outputs_check or {}).get("confirmed")
        and child.polyaxon_uuid
    ]


def evaluation_metrics(outputs: Mapping[str, Any], contract: Mapping[str, Any]) -> dict[str, float]:
    """The final metrics of an evaluation's contract, as its outputs carry them (with the contract's hash)."""
    if not outputs.get("eval_contract_hash"):
        return {}
    wanted = [str(m) for m in contract.get("metrics") or []]
    return {m: float(outputs[m]) for m in wanted if isinstance(outputs.get(m), int | float)}


def with_evaluations(deps: RegistryDeps, run: Run, own: dict[str, float]) -> tuple[dict[str, float], dict[str, str]]:
    """The run's own eval results with what its confirmed evaluations add, and which evaluation gave each added
    metric (GatewayError while Polyaxon is down)."""
    results = dict(own)
    evidence: dict[str, str] = {}
    for evaluation in confirmed_evaluations(deps, run):
        outputs = deps.gateway.get_run(evaluation.polyaxon_uuid or "", with_conditions=False).outputs
        for metric, value in evaluation_metrics(outputs, evaluation.eval_contract or {}).items():
            if metric not in results:
                results[metric] = value
                evidence[metric] = evaluation.name
    return results, evidence
