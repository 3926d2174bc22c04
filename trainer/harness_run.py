"""Run procedure `lm-eval-v1` (see `trainer.harness`) on a model folder and write what it found.

`evaluate_model` materializes the verified tasks, runs `lm_eval.simple_evaluate` and returns a `HarnessRun`;
`harness_results` makes the `eval_results.json` document, `write_samples` the per-sample audit file,
`harness_outputs` the run outputs the tracking sinks record. lm-eval is imported inside.

`eval_results.json` of a harness contract (the keys of a dataset contract's, plus `stderr` and `harness`):

    {"contract": HarnessContract.fields(), "contract_hash": "sha256:<hex>",
     "metrics": {"TASK-METRIC": float, ...},            # exactly the contract's metrics
     "stderr": {"TASK-METRIC": float | null, ...},      # same keys; null where lm-eval gives none ("N/A")
     "harness": {"name": "lm-eval", "version": <installed lm-eval>,
                 "tasks": {TASK: {"version": str, "hash": <lm-eval task hash, hex>, "digest": "sha256:<hex>",
                                  "num_fewshot": int, "limit": int, "n_samples": <documents evaluated>}}},
     "global_step": int (0 for `trainer.eval_run`), "pins": {...},
     "subject": str}                                    # `trainer.eval_run --subject` only, when set

`eval_samples.jsonl`: one line per evaluated document, tasks in name order, documents in lm-eval's order:
`{"task", "doc_id", "doc_hash", "prompt_hash", "target_hash", "target", "filter", "filtered_resps", "metrics"}`
(the three hashes are lm-eval's: the task hash can be recomputed from them).

Run outputs: each metric `TASK-METRIC`, each non-null `TASK-METRIC_stderr`, `eval_task_hashes`
("TASK=<hash>,..." sorted by task), `eval_harness_version`, `eval_results_digest`; the metrics are also logged as
metrics at the run's global step.
"""

from __future__ import annotations

import json
import math
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.evaluation import EvalContractError
from trainer.harness import (
    HARNESS,
    HARNESS_BATCH_SIZE,
    HARNESS_BOOTSTRAP_ITERS,
    TASK_FILE,
    HarnessContract,
    data_files,
    read_task_config,
    split_metric,
    task_digest,
)

SAMPLES_FILE = "eval_samples.jsonl"


@dataclass(frozen=True)
class HarnessRun:
    """What one harness evaluation produced: lm-eval's results (without samples) and the logged samples per task."""

    results: dict[str, Any]
    samples: dict[str, list[dict[str, Any]]]


def materialize_tasks(folders: dict[str, Path], include_dir: Path) -> None:
    """Copy each task.yaml into `include_dir/<name>/` with its data files rewritten to absolute paths."""
    import yaml

    for name, folder in folders.items():
        config = read_task_config(folder)
        files = data_files(config, folder)
        config["dataset_kwargs"] = {
            **config["dataset_kwargs"],
            "data_files": {split: [str(path) for path in paths] for split, paths in files.items()},
        }
        target = include_dir / name
        target.mkdir(parents=True)
        (target / TASK_FILE).write_text(yaml.safe_dump(config, sort_keys=True), encoding="utf-8")


def model_arguments(model_dir: Path, dtype: str, base_model: str = "", base_revision: str = "") -> dict[str, Any]:
    """lm-eval's `hf` model arguments for a model folder; a LoRA adapter folder runs on its base model."""
    import torch

    arguments: dict[str, Any] = {
        "pretrained": str(model_dir),
        "dtype": dtype or "float32",
        "device": "cuda" if torch.cuda.is_available() else "cpu",
    }
    adapter_config = model_dir / "adapter_config.json"
    if adapter_config.is_file():
        base = base_model or json.loads(adapter_config.read_text())["base_model_name_or_path"]
        # The tokenizer (and its chat template) saved with the adapter, not the base's.
        arguments.update(pretrained=base, peft=str(model_dir), tokenizer=str(model_dir))
        if base_revision:
            arguments["revision"] = base_revision
    return arguments


def evaluate_model(
    contract: HarnessContract,
    folders: dict[str, Path],
    model_dir: Path,
    dtype: str,
    base_model: str = "",
    base_revision: str = "",
) -> HarnessRun:
    """Run the contract's tasks on the model folder with lm-eval (see procedure `lm-eval-v1`)."""
    import lm_eval
    from lm_eval.tasks import TaskManager

    with tempfile.TemporaryDirectory(prefix="lm-eval-tasks-") as include:
        materialize_tasks(folders, Path(include))
        task_manager = TaskManager(include_path=include, include_defaults=False)
        results = lm_eval.simple_evaluate(
            model="hf",
            model_args=model_arguments(model_dir, dtype, base_model, base_revision),
            tasks=sorted(folders),
            num_fewshot=contract.num_fewshot,
            limit=contract.limit or None,
            batch_size=HARNESS_BATCH_SIZE,
            task_manager=task_manager,
            log_samples=True,
            apply_chat_template=contract.chat_template,
            bootstrap_iters=HARNESS_BOOTSTRAP_ITERS,
            random_seed=contract.seed,
            numpy_random_seed=contract.seed,
            torch_random_seed=contract.seed,
            fewshot_random_seed=contract.seed,
        )
    if results is None:  # only on a non-zero rank of a distributed lm-eval run, which this never starts
        raise EvalContractError(f"{HARNESS} returned no results")
    samples = results.pop("samples")
    return HarnessRun(results=dict(results), samples=samples)


def task_hash(samples: list[dict[str, Any]]) -> str:
    """lm-eval's task hash over a task's logged samples (what its EvaluationTracker computes when it saves)."""
    from lm_eval.utils import hash_string

    return str(hash_string("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"] for s in samples)))


def _metric_key(task_results: dict[str, Any], task: str, metric: str) -> str:
    """The `METRIC,<filter>` key of lm-eval's results for the task's one filter (`none` when it defines none)."""
    keys = [key for key in task_results if key.split(",", 1)[0] == metric and "," in key]
    if f"{metric},none" in keys:
        return f"{metric},none"
    if len(keys) != 1:
        raise EvalContractError(f"{HARNESS} reported {task}-{metric} as {keys or 'nothing'}; expected one filter")
    return keys[0]


def _number(value: Any) -> float | None:
    """A finite float, or None for lm-eval's "N/A", a missing value or NaN."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def harness_metrics(contract: HarnessContract, run: HarnessRun) -> tuple[dict[str, float], dict[str, float | None]]:
    """The contract's metrics and their standard errors (None where lm-eval gives none) from a harness run."""
    metrics: dict[str, float] = {}
    stderr: dict[str, float | None] = {}
    for name in sorted(set(contract.metrics)):
        split = split_metric(name, [t.name for t in contract.tasks])
        if split is None:  # checked before anything loaded (harness.check_tasks)
            raise EvalContractError(f"eval metric {name} names no task of the contract")
        task, metric = split
        task_results = run.results["results"].get(task, {})
        key = _metric_key(task_results, task, metric)
        value = _number(task_results[key])
        if value is None:
            raise EvalContractError(f"{HARNESS} reported {name} = {task_results[key]!r}, not a number")
        metrics[name] = value
        metric_part, _, filter_part = key.partition(",")
        stderr[name] = _number(task_results.get(f"{metric_part}_stderr,{filter_part}"))
    return metrics, stderr


def harness_results(
    contract: HarnessContract,
    folders: dict[str, Path],
    run: HarnessRun,
    global_step: int,
    pins: dict[str, Any],
    subject: str = "",
) -> dict[str, Any]:
    """Return the `eval_results.json` document of a harness contract (see the module docstring)."""
    metrics, stderr = harness_metrics(contract, run)
    pinned = {task.name: task for task in contract.tasks}
    n_samples = run.results.get("n-samples", {})
    tasks = {
        name: {
            "version": pinned[name].version,
            "hash": task_hash(run.samples.get(name, [])),
            "digest": task_digest(folders[name]),
            "num_fewshot": run.results.get("n-shot", {}).get(name, contract.num_fewshot),
            "limit": contract.limit,
            "n_samples": n_samples.get(name, {}).get("effective", len(run.samples.get(name, []))),
        }
        for name in sorted(folders)
    }
    document: dict[str, Any] = {
        "contract": contract.fields(),
        "contract_hash": contract.hash(),
        "metrics": metrics,
        "stderr": stderr,
        "harness": {"name": HARNESS, "version": str(run.results.get("lm_eval_version", "")), "tasks": tasks},
        "global_step": global_step,
        "pins": pins,
    }
    if subject:
        document["subject"] = subject
    return document


def _plain(value: Any) -> Any:
    """JSON-ready form of lm-eval's sample values (numpy scalars, tuples)."""
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, tuple | list):
        return [_plain(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    return value


def write_samples(path: Path, run: HarnessRun) -> None:
    """Write one JSON line per evaluated document: task, doc id, hashes, target, filtered response, metric values."""
    with path.open("w", encoding="utf-8", newline="\n") as handle:
        for task in sorted(run.samples):
            for sample in run.samples[task]:
                record = {
                    "task": task,
                    "doc_id": sample["doc_id"],
                    "doc_hash": sample["doc_hash"],
                    "prompt_hash": sample["prompt_hash"],
                    "target_hash": sample["target_hash"],
                    "target": _plain(sample["target"]),
                    "filter": sample.get("filter", "none"),
                    "filtered_resps": _plain(sample["filtered_resps"]),
                    "metrics": {name: _plain(sample.get(name)) for name in sample.get("metrics", [])},
                }
                handle.write(json.dumps(record, sort_keys=True, ensure_ascii=False, default=str) + "\n")


def harness_outputs(document: dict[str, Any]) -> dict[str, Any]:
    """The run outputs of a harness evaluation: each metric, each non-null `METRIC_stderr`, the task hashes and the
    harness version."""
    outputs: dict[str, Any] = dict(document["metrics"])
    outputs.update({f"{name}_stderr": value for name, value in document["stderr"].items() if value is not None})
    tasks = document["harness"]["tasks"]
    outputs["eval_task_hashes"] = ",".join(f"{name}={tasks[name]['hash']}" for name in sorted(tasks))
    outputs["eval_harness_version"] = document["harness"]["version"]
    return outputs


def evaluate_and_record(
    contract: HarnessContract,
    folders: dict[str, Path],
    model_dir: Path,
    dtype: str,
    output_dir: Path,
    sink: Any,
    global_step: int,
    pins: dict[str, Any],
    *,
    subject: str = "",
    base_model: str = "",
    base_revision: str = "",
) -> dict[str, Any]:
    """Evaluate the model folder, write `eval_results.json` and `eval_samples.jsonl` into `output_dir`, record the
    metrics (at `global_step`), outputs and artifacts in `sink` (a `TrackingSink`); return the document."""
    from trainer.digests import file_sha256

    run = evaluate_model(contract, folders, model_dir, dtype, base_model, base_revision)
    document = harness_results(contract, folders, run, global_step, pins, subject)
    eval_path = output_dir / "eval_results.json"
    eval_path.write_text(json.dumps(document, indent=2, sort_keys=True) + "\n")
    samples_path = output_dir / SAMPLES_FILE
    write_samples(samples_path, run)
    sink.log_metrics(global_step, document["metrics"])
    sink.log_outputs({"eval_results_digest": "sha256:" + file_sha256(eval_path), **harness_outputs(document)})
    sink.log_artifact(eval_path, "eval_results", "file")
    sink.log_artifact(samples_path, "eval_samples", "file")
    return document
