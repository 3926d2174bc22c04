"""The eval contract as runs carry it: its ranking metric, and where two runs' contracts differ. Pure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from bot.catalog.contract import primary_metric

if TYPE_CHECKING:
    from storage.models import Run

__all__ = [
    "CONTRACT_FIELDS",
    "contract_differences",
    "parse_task_hashes",
    "primary_metric",
    "task_differences",
    "task_hashes",
]

CONTRACT_FIELDS = ("dataset", "revision", "split", "max_samples", "metrics", "procedure_version", "seed")
# A harness suite's contract (bot.catalog.harness) besides `metrics`, `seed` and `procedure_version`.
HARNESS_FIELDS = ("harness", "harness_version", "num_fewshot", "limit", "chat_template")


def contract_differences(runs: Sequence[Run], task_hashes: Mapping[int, Mapping[str, str]] | None = None) -> list[str]:
    """Eval-contract fields that differ between the runs, as `field: a vs b`; for a harness suite also each task's
    version, data digest and hash (what the run reported, `task_hashes` by run id), naming the task."""
    first = runs[0].eval_contract or {}
    out: list[str] = []
    for field in (*CONTRACT_FIELDS, *HARNESS_FIELDS):
        values = [str((r.eval_contract or {}).get(field)) for r in runs]
        if len(set(values)) > 1:
            out.append(f"{field}: " + " vs ".join(dict.fromkeys(values)))
    out += task_differences(runs, task_hashes or {})
    if not out and len({r.eval_contract_hash for r in runs}) > 1 and first:
        out.append("eval contract hash: " + " vs ".join(dict.fromkeys(r.eval_contract_hash[:12] for r in runs)))
    return out


def task_differences(runs: Sequence[Run], task_hashes: Mapping[int, Mapping[str, str]]) -> list[str]:
    """Where the runs' harness tasks differ: a task's version or data (the contracts), or its hash over the samples
    used (what each run reported; a run that reported none is not judged here, `outputs` checks it)."""
    out: list[str] = []
    tasks: dict[str, dict[int, dict[str, str]]] = {}
    for run in runs:
        for task in (run.eval_contract or {}).get("tasks") or []:
            tasks.setdefault(str(task.get("name")), {})[run.id or 0] = {k: str(v) for k, v in task.items()}
    for name, by_run in sorted(tasks.items()):
        for field in ("version", "digest"):
            values = {entry.get(field) for entry in by_run.values()}
            if len(values) > 1 or len(by_run) < len(runs):
                shown = [str(entry.get(field))[:19] for entry in by_run.values()]
                missing = " (not run by every run)" if len(by_run) < len(runs) else ""
                out.append(f"task {name} {field}: " + " vs ".join(dict.fromkeys(shown)) + missing)
                break
        hashes = {run.name: task_hashes.get(run.id or 0, {}).get(name) for run in runs}
        known = {h for h in hashes.values() if h}
        if len(known) > 1:
            out.append(
                f"task {name} hash (the samples and prompts it evaluated): "
                + " vs ".join(f"{h[:12]} ({', '.join(n for n, v in hashes.items() if v == h)})" for h in sorted(known))
            )
    return out


def task_hashes(document: Mapping[str, Any]) -> dict[str, str]:
    """Each task's hash as the results report it (empty without a harness section)."""
    harness = document.get("harness")
    tasks = harness.get("tasks") if isinstance(harness, Mapping) else None
    if not isinstance(tasks, Mapping):
        return {}
    return {str(name): str(t.get("hash")) for name, t in tasks.items() if isinstance(t, Mapping) and t.get("hash")}


def parse_task_hashes(text: object) -> dict[str, str]:
    """`eval_task_hashes` as a run's outputs carry it (`task=hash,task=hash`), as a mapping."""
    if not isinstance(text, str):
        return {}
    pairs = (part.partition("=") for part in text.split(",") if "=" in part)
    return {name.strip(): value.strip() for name, _, value in pairs if name.strip() and value.strip()}
