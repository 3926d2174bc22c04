"""Evaluation suites on lm-evaluation-harness: the catalog's tasks and suites, and the eval contract a suite makes.

A task is an lm-eval task YAML beside its local data, one folder per task (`manifests/evals/tasks/NAME/`: a
`task.yaml` whose `task:` is NAME, and the data files it reads); the folder is pinned as a whole by its content
digest, and its YAML may not use `!function` (code the pins would not cover). A suite
(`manifests/evals/suites/NAME.yaml`) names the harness and its version, tasks, n-shot, document limit, seed, chat
template and the metrics it reports (`TASK-METRIC`, e.g. `tiny_capitals-acc`: a name Polyaxon keeps as it is, where
it would turn a `.` or `/` into something else). A recipe's `eval: {suite: NAME}`
makes the suite its eval contract; `/finetune eval RUN suite=NAME` evaluates a finished model on any suite.

The contract's fields are exactly those `trainer.harness` hashes (same canonical JSON as every contract):

    {"harness", "harness_version", "tasks": [{"name", "version", "digest"}] sorted by name, "num_fewshot",
     "limit", "seed", "chat_template", "metrics": sorted unique, "procedure_version": "lm-eval-v1"}

What only the run can know (each task's hash over the samples it used, which depends on the model's chat
template) is in its `eval_results.json`; `compare` refuses runs whose task hashes differ.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field

from bot.catalog.digests import content_digest
from bot.catalog.errors import CatalogError, PlanError
from bot.catalog.files import read_named
from bot.catalog.yamlfile import safe_load
from bot.grammar import closest, did_you_mean

HARNESS_PROCEDURE = "lm-eval-v1"
TASK_FILE = "task.yaml"
# The component inputs a suite sets (trainer EvalArguments): a component without them runs no harness.
HARNESS_INPUTS = ("eval_harness", "eval_harness_version", "eval_tasks", "eval_tasks_dir")


class SuiteFile(BaseModel):
    """The schema of `manifests/evals/suites/NAME.yaml`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    harness: Literal["lm-eval"]
    harness_version: str = Field(pattern=r"^\d+\.\d+(\.\d+)?$", description="The lm-eval release, as pinned")
    tasks: list[str] = Field(min_length=1)
    num_fewshot: int = Field(default=0, ge=0, le=64)
    limit: int = Field(default=0, ge=0, description="Documents per task; 0: all of them")
    seed: int = 0
    chat_template: bool = False
    metrics: list[str] = Field(min_length=1, description="TASK-METRIC; the first ranks runs")


@dataclass(frozen=True)
class HarnessTask:
    """One task folder: its name, version (the YAML's `metadata.version`), digest and the metrics it computes."""

    name: str
    version: str
    digest: str
    metrics: tuple[str, ...]
    output_type: str


@dataclass(frozen=True)
class Suite:
    """A loaded suite with its tasks resolved."""

    spec: SuiteFile
    file: str
    tasks: tuple[HarnessTask, ...]
    tasks_dir: str  # where the task folders are, as the job reads it (relative to the repository root)

    @property
    def name(self) -> str:
        """The suite's name."""
        return self.spec.name

    def contract(self) -> dict[str, Any]:
        """The eval contract's fields (see the module docstring)."""
        spec = self.spec
        return {
            "harness": spec.harness,
            "harness_version": spec.harness_version,
            "tasks": [
                {"name": t.name, "version": t.version, "digest": t.digest} for t in sorted(self.tasks, key=_name)
            ],
            "num_fewshot": spec.num_fewshot,
            "limit": spec.limit,
            "seed": spec.seed,
            "chat_template": spec.chat_template,
            "metrics": sorted(set(spec.metrics)),
            "procedure_version": HARNESS_PROCEDURE,
        }

    def inputs(self) -> dict[str, Any]:
        """The component inputs that hand the contract to the job (trainer EvalArguments)."""
        spec = self.spec
        return {
            "eval_harness": spec.harness,
            "eval_harness_version": spec.harness_version,
            "eval_tasks": ",".join(f"{t.name}@{t.version}@{t.digest}" for t in sorted(self.tasks, key=_name)),
            "eval_tasks_dir": self.tasks_dir,
            "eval_num_fewshot": spec.num_fewshot,
            "eval_limit": spec.limit,
            "eval_chat_template": spec.chat_template,
            "eval_seed": spec.seed,
            "eval_metrics": ",".join(spec.metrics),
            "eval_procedure_version": HARNESS_PROCEDURE,
        }

    def describe(self) -> str:
        """One line: the harness, the tasks and how they are run."""
        spec = self.spec
        shots = f"{spec.num_fewshot}-shot"
        limit = f", {spec.limit} documents per task" if spec.limit else ""
        template = ", chat template" if spec.chat_template else ""
        tasks = ", ".join(f"{t.name} v{t.version}" for t in self.tasks)
        return f"{spec.harness} {spec.harness_version}: {tasks} ({shots}{limit}{template}, seed {spec.seed})"


def _name(task: HarnessTask) -> str:
    return task.name


def load_tasks(root: Path) -> dict[str, HarnessTask]:
    """Every task folder under `root/evals/tasks`, its YAML read and its folder digested."""
    tasks: dict[str, HarnessTask] = {}
    base = root / "evals" / "tasks"
    for path in sorted(base.glob(f"*/{TASK_FILE}")):
        rel = path.relative_to(root).as_posix()
        task = _load_task(path, rel)
        tasks[task.name] = task
    return tasks


def _load_task(path: Path, rel: str) -> HarnessTask:
    folder = path.parent
    try:
        data = safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        # lm-eval's `!function` tag lands here too: code outside the pinned folder is not allowed.
        raise CatalogError(rel, "(file)", f"not plain YAML (a task here may not use !function): {exc}") from exc
    if not isinstance(data, dict):
        raise CatalogError(rel, "(file)", "expected an lm-eval task mapping")
    if data.get("task") != folder.name:
        raise CatalogError(rel, "task", f"must equal the folder name {folder.name!r}")
    if "include" in data:
        raise CatalogError(rel, "include", "a pinned task is one file: inline what it includes")
    version = (data.get("metadata") or {}).get("version")
    if version is None:
        raise CatalogError(rel, "metadata.version", "a task states its version (metadata: {version: N})")
    metrics = tuple(str(m.get("metric")) for m in data.get("metric_list") or [] if isinstance(m, dict))
    if not metrics:
        raise CatalogError(rel, "metric_list", "names no metric")
    files = (data.get("dataset_kwargs") or {}).get("data_files") or {}
    for split, name in files.items() if isinstance(files, dict) else []:
        if not isinstance(name, str) or Path(name).is_absolute() or ".." in Path(name).parts:
            raise CatalogError(rel, f"dataset_kwargs.data_files.{split}", "must be a file inside the task's folder")
        if not (folder / name).is_file():
            raise CatalogError(rel, f"dataset_kwargs.data_files.{split}", f"{name} is not in {folder.name}/")
    return HarnessTask(
        name=folder.name,
        version=str(version),
        digest=content_digest(folder),
        metrics=metrics,
        output_type=str(data.get("output_type") or ""),
    )


def load_suites(root: Path, tasks: dict[str, HarnessTask]) -> dict[str, Suite]:
    """Every suite under `root/evals/suites`, its tasks and metrics checked against the task folders."""
    suites: dict[str, Suite] = {}
    tasks_dir = _as_job_reads(root / "evals" / "tasks", root.parent)
    for path in sorted((root / "evals" / "suites").glob("*.yaml")):
        rel = path.relative_to(root).as_posix()
        spec = read_named(path, rel, SuiteFile)
        for name in spec.tasks:
            if name not in tasks:
                raise CatalogError(rel, "tasks", f"no task {name!r}{did_you_mean(closest(name, list(tasks)))}")
        for metric in spec.metrics:
            problem = metric_problem(metric, {name: tasks[name] for name in spec.tasks})
            if problem:
                raise CatalogError(rel, "metrics", problem)
        suites[spec.name] = Suite(spec, rel, tuple(tasks[name] for name in spec.tasks), tasks_dir)
    return suites


def split_metric(metric: str, tasks: Iterable[str]) -> tuple[str, str] | None:
    """`TASK-METRIC` as (task, metric) for one of `tasks` (the longest that fits: task names may hold `-`)."""
    fits = [task for task in tasks if metric.startswith(task + "-") and len(metric) > len(task) + 1]
    if not fits:
        return None
    task = max(fits, key=len)
    return task, metric[len(task) + 1 :]


def metric_problem(metric: str, tasks: dict[str, HarnessTask]) -> str | None:
    """Why `TASK-METRIC` is not one the suite's tasks compute, or None."""
    split = split_metric(metric, tasks)
    if split is None:
        example = f"{next(iter(tasks), 'task')}-acc"
        return f"{metric!r} is not TASK-METRIC for a task of the suite ({', '.join(tasks)}; e.g. {example})"
    task_name, name = split
    task = tasks[task_name]
    if name not in task.metrics:
        return f"task {task_name} computes {', '.join(task.metrics)}, not {name!r}"
    return None


def find_suite(suites: dict[str, Suite], name: str) -> Suite:
    """The suite called `name`, or a PlanError with the closest names and every suite."""
    if name in suites:
        return suites[name]
    suggestions = closest(name, list(suites))
    raise PlanError(
        f"no evaluation suite {name!r}{did_you_mean(suggestions)} (suites: {', '.join(suites) or 'none'})",
        suggestions=suggestions,
    )


def _as_job_reads(path: Path, repo_root: Path) -> str:
    """A catalog path as a job on the local stack reads it: relative to the repository root when inside it."""
    try:
        return path.relative_to(repo_root).as_posix()
    except ValueError:
        return path.as_posix()
