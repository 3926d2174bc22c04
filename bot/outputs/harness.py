"""A harness suite's results as the run wrote them (`eval_results.json`'s `harness` section), checked against the
contract the run was submitted with. Pure.

The contract pins the harness version and each task's version and folder digest (bot.catalog.harness); the
results must report the same, a hash for every task (lm-eval's hash over the samples it used) and every metric
of the contract. The task hashes (`bot.runs.evals.task_hashes`) are kept with the outputs check: `compare`
refuses runs whose hashes differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def harness_problems(document: Mapping[str, Any], contract: Mapping[str, Any]) -> list[str]:
    """Why a harness contract's results do not check out (empty when they do, or for other contracts)."""
    if contract.get("harness") is None:
        return []
    harness = document.get("harness")
    if not isinstance(harness, Mapping):
        return ["no `harness` section although the contract is a harness suite"]
    problems: list[str] = []
    if harness.get("version") != contract.get("harness_version"):
        ran_version, pinned = harness.get("version"), contract.get("harness_version")
        problems.append(f"{contract.get('harness')} {ran_version} ran, the contract pins {pinned}")
    found = harness.get("tasks")
    ran: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    for task in contract.get("tasks") or []:
        name = str(task.get("name"))
        result = ran.get(name)
        if not isinstance(result, Mapping):
            problems.append(f"task {name} has no results")
            continue
        if str(result.get("version")) != str(task.get("version")):
            problems.append(
                f"task {name} ran at version {result.get('version')}, the contract pins {task.get('version')}"
            )
        if result.get("digest") != task.get("digest"):
            problems.append(f"task {name}'s data digest differs from the contract's")
        if not result.get("hash"):
            problems.append(f"task {name} has no task hash")
    extra = sorted(set(ran) - {str(t.get("name")) for t in contract.get("tasks") or []})
    if extra:
        problems.append(f"tasks outside the contract: {', '.join(extra)}")
    written = document.get("metrics")
    metrics: Mapping[str, Any] = written if isinstance(written, Mapping) else {}
    missing = [m for m in contract.get("metrics") or [] if m not in metrics]
    if missing:
        problems.append(f"metrics missing: {', '.join(missing)}")
    return problems
