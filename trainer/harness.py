"""The harness eval contract (procedure `lm-eval-v1`): lm-evaluation-harness tasks pinned by version and digest.

A recipe's harness contract names the harness and its exact version, the tasks (each by name, its task.yaml's
`metadata.version`, and the digest of its folder), the few-shot count, the document limit, the seed, whether the
chat template is applied, the reported metrics (`TASK-METRIC`) and the procedure version. Its hash is
`trainer.evaluation.contract_hash` of exactly these fields (the bot's catalog computes the same):

    {"harness": "lm-eval", "harness_version": "0.4.13",
     "tasks": [{"name": str, "version": str, "digest": "sha256:<hex>"}, ...],   # sorted by name
     "num_fewshot": int, "limit": int (0 = every document), "seed": int, "chat_template": bool,
     "metrics": sorted unique "TASK-METRIC" names, "procedure_version": "lm-eval-v1"}

Task folders. A task is a folder `<tasks dir>/<name>/` holding exactly `task.yaml` (an lm-eval task config whose
`task:` is the folder's name) and the data files it names in `dataset_kwargs.data_files`, relative to the folder.
Its digest (`task_digest`) is the bot's `content_digest` of the folder: one `"<sha256 hex>  <relative path>\\n"`
line per file (sha256sum format, every file, sorted by path, `__pycache__` skipped), digest = "sha256:" + sha256
of the joined lines. The tasks directory itself is not in the contract: the digests are.

Before anything loads (`verify_tasks`), the run refuses (EvalContractError) when: the pinned contract hash differs
from the hash of these fields; the installed lm-eval is not `harness_version`; a task folder is missing or its
digest is not the pinned one; a task.yaml's `task` is not the folder's name or its `metadata.version` (as a string)
is not the pinned version; a metric names a task the contract does not list or a metric missing from that task's
`metric_list`.

Procedure `lm-eval-v1` (`trainer.harness_run`):

* Materialization: each verified task.yaml is copied into a fresh temporary include folder with its
  `dataset_kwargs.data_files` rewritten to the absolute paths of the verified files, and read with
  `TaskManager(include_path=<that folder>, include_defaults=False)` (lm-eval's own tasks are not indexed: only the
  contract's tasks can run).
* Model: `lm_eval.simple_evaluate(model="hf")` on the final model folder (a LoRA adapter folder runs as
  `pretrained=<base>, peft=<folder>`), on CUDA when available else CPU, in the run's dtype, at batch size
  `HARNESS_BATCH_SIZE`.
* Seeds: lm-eval's four seeds (`random_seed`, `numpy_random_seed`, `torch_random_seed`, `fewshot_random_seed`) are
  all the contract's `seed`; `num_fewshot` as pinned; `limit` None when 0, else that many documents per task
  (lm-eval takes the first `limit` documents of the test split).
* Chat template: when `chat_template` is true, lm-eval's `apply_chat_template=True` renders each prompt through
  the tokenizer's chat template with the generation prompt (multiple-choice continuations then follow the
  prompt without a delimiter, as lm-eval does); `fewshot_as_multiturn` is lm-eval's default.
* Metrics: `TASK-METRIC` is lm-eval's `results[TASK]["METRIC,<filter>"]` for the task's one filter (`none` when
  the task defines none). Its stderr is `results[TASK]["METRIC_stderr,<filter>"]`: analytic for `mean`
  aggregations (sample standard deviation / sqrt(n)), bootstrapped with `HARNESS_BOOTSTRAP_ITERS` resamples for
  the metrics lm-eval bootstraps, and null where lm-eval reports none ("N/A").
* Task hash: lm-eval's own definition (its `EvaluationTracker` computes it when it writes an output folder,
  which this procedure does not): `hash_string("".join(s["doc_hash"] + s["prompt_hash"] + s["target_hash"]))` over
  the task's logged samples in order, `hash_string` being lm-eval's sha256 hex. It covers the documents, the
  rendered prompts (so the chat template) and the targets, not the model: two models with one tokenizer give the
  same task hash.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from trainer.evaluation import EvalContractError, contract_hash

HARNESS = "lm-eval"
HARNESS_PROCEDURE = "lm-eval-v1"
TASK_FILE = "task.yaml"
HARNESS_BATCH_SIZE = 8
HARNESS_BOOTSTRAP_ITERS = 1000
# `datasets` builders that read local files: a task's data is files in its folder.
LOCAL_BUILDERS = ("json", "csv", "parquet", "text")


@dataclass(frozen=True)
class PinnedTask:
    """A task of the contract: its name, its task.yaml's `metadata.version`, its folder's digest."""

    name: str
    version: str
    digest: str


@dataclass(frozen=True)
class HarnessContract:
    """The fields that define a comparable harness evaluation (see the module docstring)."""

    harness_version: str
    tasks: tuple[PinnedTask, ...]
    num_fewshot: int
    limit: int
    seed: int
    chat_template: bool
    metrics: tuple[str, ...]
    procedure_version: str = HARNESS_PROCEDURE

    def fields(self) -> dict[str, Any]:
        """Return the canonical field mapping that the hash covers."""
        return {
            "harness": HARNESS,
            "harness_version": self.harness_version,
            "tasks": [
                {"name": task.name, "version": task.version, "digest": task.digest}
                for task in sorted(self.tasks, key=lambda task: task.name)
            ],
            "num_fewshot": self.num_fewshot,
            "limit": self.limit,
            "seed": self.seed,
            "chat_template": self.chat_template,
            "metrics": sorted(set(self.metrics)),
            "procedure_version": self.procedure_version,
        }

    def hash(self) -> str:
        """The contract hash (`trainer.evaluation.contract_hash` of `fields()`)."""
        return contract_hash(self.fields())


def split_metric(metric: str, tasks: Iterable[str]) -> tuple[str, str] | None:
    """`TASK-METRIC` as (task, metric) for one of `tasks`: the longest task name it starts with (task names may hold
    `-`). The bot's catalog splits names the same way (bot.catalog.harness.split_metric). `-`, not `.`: Polyaxon
    keeps a metric name with `-` as it is, and turns `.` and `/` into something else."""
    fits = [task for task in tasks if metric.startswith(task + "-") and len(metric) > len(task) + 1]
    if not fits:
        return None
    task = max(fits, key=len)
    return task, metric[len(task) + 1 :]


def task_digest(folder: Path) -> str:
    """`sha256:<hex>` of a task folder: the bot's `content_digest` (every file, sha256sum-format lines, sorted)."""
    lines = []
    for file in sorted(p for p in folder.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        file_hash = hashlib.sha256(file.read_bytes()).hexdigest()
        lines.append(f"{file_hash}  {file.relative_to(folder).as_posix()}\n")
    return "sha256:" + hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def parse_task_pins(text: str) -> tuple[PinnedTask, ...]:
    """Split `NAME@VERSION@sha256:HEX,...` into pinned tasks, refusing malformed or repeated entries."""
    tasks: dict[str, PinnedTask] = {}
    for item in (part.strip() for part in text.split(",")):
        if not item:
            continue
        parts = item.split("@")
        if len(parts) != 3 or not all(parts) or not parts[2].startswith("sha256:"):
            raise EvalContractError(f"eval task {item!r} is not NAME@VERSION@sha256:HEX")
        name, version, digest = parts
        if name in tasks:
            raise EvalContractError(f"eval task {name} is listed twice")
        tasks[name] = PinnedTask(name=name, version=version, digest=digest)
    if not tasks:
        raise EvalContractError("the harness contract names no tasks (--eval_tasks NAME@VERSION@sha256:HEX,...)")
    return tuple(sorted(tasks.values(), key=lambda task: task.name))


def harness_contract_from_args(eval_args: Any) -> HarnessContract | None:
    """Build the harness contract from `EvalArguments` (None without `--eval_harness`) and check its pinned hash."""
    if not eval_args.eval_harness:
        return None
    if eval_args.eval_harness != HARNESS:
        raise EvalContractError(f"unknown eval harness {eval_args.eval_harness!r}; known: {HARNESS}")
    if eval_args.eval_dataset_name:
        raise EvalContractError("a run has one eval contract: --eval_harness and --eval_dataset_name are both set")
    if eval_args.eval_procedure_version != HARNESS_PROCEDURE:
        raise EvalContractError(
            f"the {HARNESS} harness is evaluated by procedure {HARNESS_PROCEDURE}; the contract names "
            f"{eval_args.eval_procedure_version}"
        )
    if not eval_args.eval_harness_version:
        raise EvalContractError(f"the harness contract pins no {HARNESS} version (--eval_harness_version)")
    if eval_args.eval_limit < 0 or eval_args.eval_num_fewshot < 0:
        raise EvalContractError("eval_limit and eval_num_fewshot must be >= 0")
    metrics = tuple(name.strip() for name in eval_args.eval_metrics.split(",") if name.strip())
    if not metrics:
        raise EvalContractError("the eval contract names no metrics")
    contract = HarnessContract(
        harness_version=eval_args.eval_harness_version,
        tasks=parse_task_pins(eval_args.eval_tasks),
        num_fewshot=eval_args.eval_num_fewshot,
        limit=eval_args.eval_limit,
        seed=eval_args.eval_seed,
        chat_template=bool(eval_args.eval_chat_template),
        metrics=metrics,
    )
    expected = eval_args.eval_contract_hash
    actual = contract.hash()
    if expected and expected.removeprefix("sha256:") != actual.removeprefix("sha256:"):
        raise EvalContractError(f"eval contract hash is {actual}, the recipe pins {expected}")
    return contract


def check_harness_version(contract: HarnessContract) -> None:
    """Refuse to run when the installed lm-eval is not the version the contract pins."""
    import lm_eval

    installed = str(lm_eval.__version__)
    if installed != contract.harness_version:
        raise EvalContractError(
            f"the eval contract pins {HARNESS} {contract.harness_version}; this environment has {installed}"
        )


def read_task_config(folder: Path) -> dict[str, Any]:
    """Read a task folder's task.yaml (a mapping), refusing anything else."""
    import yaml

    path = folder / TASK_FILE
    if not path.is_file():
        raise EvalContractError(f"eval task folder {folder} has no {TASK_FILE}")
    try:
        config = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        raise EvalContractError(f"{path} is not valid YAML: {exc}") from exc
    if not isinstance(config, dict):
        raise EvalContractError(f"{path} is not a mapping")
    return config


def task_metric_names(config: dict[str, Any]) -> list[str]:
    """The metric names of a task config's `metric_list`."""
    return [str(entry["metric"]) for entry in config.get("metric_list") or [] if isinstance(entry, dict)]


def data_files(config: dict[str, Any], folder: Path) -> dict[str, list[Path]]:
    """A task config's local data files, split -> files, each inside the task folder (so under its digest)."""
    name = config.get("task")
    if config.get("dataset_path") not in LOCAL_BUILDERS:
        raise EvalContractError(
            f"eval task {name}: dataset_path {config.get('dataset_path')!r} is not a local data builder "
            f"({', '.join(LOCAL_BUILDERS)}): the task's data must be files in its folder"
        )
    named = (config.get("dataset_kwargs") or {}).get("data_files")
    if not isinstance(named, dict) or not named:
        raise EvalContractError(f"eval task {name}: dataset_kwargs.data_files names no files (split: file)")
    files: dict[str, list[Path]] = {}
    root = folder.resolve()
    for split, value in named.items():
        paths = [value] if isinstance(value, str) else list(value) if isinstance(value, list) else None
        if not paths or not all(isinstance(path, str) for path in paths):
            raise EvalContractError(f"eval task {name}: data_files.{split} is not a file name or a list of them")
        resolved = [(folder / path).resolve() for path in paths]
        for path, full in zip(paths, resolved, strict=True):
            if Path(path).is_absolute() or not full.is_relative_to(root) or not full.is_file():
                raise EvalContractError(f"eval task {name}: data_files.{split} {path!r} is not a file in {folder}")
        files[str(split)] = resolved
    return files


def verify_tasks(contract: HarnessContract, tasks_dir: Path) -> dict[str, Path]:
    """Check the lm-eval version, each task folder's digest and version, and the metrics; return name -> folder."""
    check_harness_version(contract)
    folders: dict[str, Path] = {}
    metrics_of: dict[str, list[str]] = {}
    for task in contract.tasks:
        folder = tasks_dir / task.name
        if not folder.is_dir():
            raise EvalContractError(f"eval task {task.name}: no folder {folder} (--eval_tasks_dir {tasks_dir})")
        actual = task_digest(folder)
        if actual.removeprefix("sha256:") != task.digest.removeprefix("sha256:"):
            raise EvalContractError(
                f"eval task {task.name}: folder {folder} has digest {actual}, the contract pins {task.digest}"
            )
        config = read_task_config(folder)
        if config.get("task") != task.name:
            raise EvalContractError(f"eval task {task.name}: {folder / TASK_FILE} defines task {config.get('task')!r}")
        version = (config.get("metadata") or {}).get("version")
        if version is None or str(version) != task.version:
            raise EvalContractError(
                f"eval task {task.name}: task.yaml has metadata.version {version}, the contract pins {task.version}"
            )
        data_files(config, folder)
        folders[task.name] = folder
        metrics_of[task.name] = task_metric_names(config)
    for metric in contract.metrics:
        split = split_metric(metric, metrics_of)
        if split is None:
            raise EvalContractError(
                f"eval metric {metric} is not TASK-METRIC for a task the contract lists ({', '.join(metrics_of)})"
            )
        task_name, metric_name = split
        if metric_name not in metrics_of[task_name]:
            raise EvalContractError(
                f"eval metric {metric}: task {task_name} has no metric {metric_name!r} "
                f"(its metric_list: {', '.join(metrics_of[task_name]) or 'none'})"
            )
    return folders


def prepare_harness(eval_args: Any) -> tuple[HarnessContract, dict[str, Path]] | None:
    """The run's harness contract with its verified task folders (None without `--eval_harness`)."""
    contract = harness_contract_from_args(eval_args)
    if contract is None:
        return None
    return contract, verify_tasks(contract, Path(eval_args.eval_tasks_dir))
