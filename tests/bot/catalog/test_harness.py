"""Harness suites in the catalog (issue 37): task folders pinned by digest, suites checked against their tasks, the
contract a suite makes and the inputs it hands the job, and `/finetune eval`'s plan."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.catalog import Catalog, CatalogError, PlanError
from bot.catalog.choices import ChainBase
from bot.catalog.digests import content_digest, eval_contract_hash
from bot.catalog.harness import HARNESS_PROCEDURE, load_suites, load_tasks, split_metric
from bot.grammar import RunCommand, parse_command
from tests.manifests.catalog_repo import write

MC_TASK = """task: {name}
dataset_path: json
dataset_kwargs:
  data_files:
    test: test.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: "{{{{question}}}}"
doc_to_choice: "{{{{choices}}}}"
doc_to_target: "{{{{answer}}}}"
metric_list:
  - {{metric: acc, aggregation: mean, higher_is_better: true}}
  - {{metric: acc_norm, aggregation: mean, higher_is_better: true}}
metadata:
  version: {version}
"""

SUITE = """name: {name}
description: test suite
harness: lm-eval
harness_version: 0.4.13
tasks: [{tasks}]
num_fewshot: 0
limit: 0
seed: 7
chat_template: true
metrics: [{metrics}]
"""


def make_task(root: Path, name: str, *, version: str = "1.0", text: str | None = None) -> Path:
    folder = root / "evals" / "tasks" / name
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "task.yaml").write_text(text if text is not None else MC_TASK.format(name=name, version=version))
    row = {"question": "What is the capital of France?", "choices": ["Paris", "Rome"], "answer": 0}
    (folder / "test.jsonl").write_text(json.dumps(row) + "\n")
    return folder


def test_a_task_is_its_folder_pinned_by_content_digest_with_its_version_and_metrics(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "caps", version="2.1")
    task = load_tasks(tmp_path)["caps"]
    assert (task.version, task.metrics, task.output_type) == ("2.1", ("acc", "acc_norm"), "multiple_choice")
    assert task.digest == content_digest(folder)
    (folder / "test.jsonl").write_text('{"question": "changed"}\n')
    assert load_tasks(tmp_path)["caps"].digest != task.digest, "the data is part of the pin"


@pytest.mark.parametrize(
    ("text", "field", "says"),
    [
        ("task: other\nmetric_list: [{metric: acc}]\nmetadata: {version: 1}\n", "task", "folder name"),
        ("task: caps\nmetric_list: [{metric: acc}]\n", "metadata.version", "states its version"),
        ("task: caps\nmetadata: {version: 1}\n", "metric_list", "names no metric"),
        (
            "task: caps\ninclude: base.yaml\nmetric_list: [{metric: acc}]\nmetadata: {version: 1}\n",
            "include",
            "one file",
        ),
        ("task: caps\nprocess_docs: !function utils.process\nmetadata: {version: 1}\n", "(file)", "!function"),
        (
            "task: caps\ndataset_kwargs: {data_files: {test: ../../secret.jsonl}}\nmetric_list: [{metric: acc}]\n"
            "metadata: {version: 1}\n",
            "dataset_kwargs.data_files.test",
            "inside the task's folder",
        ),
        (
            "task: caps\ndataset_kwargs: {data_files: {test: missing.jsonl}}\nmetric_list: [{metric: acc}]\n"
            "metadata: {version: 1}\n",
            "dataset_kwargs.data_files.test",
            "missing.jsonl is not in caps/",
        ),
    ],
)
def test_a_task_the_pins_would_not_cover_is_refused_naming_its_field(
    tmp_path: Path, text: str, field: str, says: str
) -> None:
    make_task(tmp_path, "caps", text=text)
    with pytest.raises(CatalogError) as info:
        load_tasks(tmp_path)
    assert f"evals/tasks/caps/task.yaml: {field}:" in str(info.value) and says in str(info.value)


def test_a_suite_names_tasks_and_metrics_its_tasks_compute(tmp_path: Path) -> None:
    make_task(tmp_path, "caps")
    tasks = load_tasks(tmp_path)
    write(tmp_path, "evals/suites/bad-task.yaml", SUITE.format(name="bad-task", tasks="capz", metrics="caps-acc"))
    with pytest.raises(CatalogError, match=r"bad-task.yaml: tasks: no task 'capz'; did you mean caps\?"):
        load_suites(tmp_path, tasks)
    (tmp_path / "evals/suites/bad-task.yaml").unlink()
    write(tmp_path, "evals/suites/bad-metric.yaml", SUITE.format(name="bad-metric", tasks="caps", metrics="caps-f1"))
    with pytest.raises(CatalogError, match="task caps computes acc, acc_norm, not 'f1'"):
        load_suites(tmp_path, tasks)
    write(tmp_path, "evals/suites/bad-metric.yaml", SUITE.format(name="bad-metric", tasks="caps", metrics="caps.acc"))
    with pytest.raises(CatalogError, match=r"'caps\.acc' is not TASK-METRIC"):
        load_suites(tmp_path, tasks)


def test_a_metric_name_splits_at_the_longest_task_it_starts_with() -> None:
    assert split_metric("arc-easy-acc_norm", ["arc", "arc-easy"]) == ("arc-easy", "acc_norm")
    assert split_metric("arc-acc", ["arc", "arc-easy"]) == ("arc", "acc")
    assert split_metric("arc", ["arc"]) is None


def test_the_suite_contract_is_the_documented_dict_and_hash(tmp_path: Path) -> None:
    make_task(tmp_path, "caps")
    make_task(tmp_path, "arith")
    write(
        tmp_path,
        "evals/suites/two.yaml",
        SUITE.format(name="two", tasks="caps, arith", metrics="caps-acc, arith-acc_norm"),
    )
    tasks = load_tasks(tmp_path)
    suite = load_suites(tmp_path, tasks)["two"]
    fields = suite.contract()
    assert fields == {
        "harness": "lm-eval",
        "harness_version": "0.4.13",
        "tasks": [
            {"name": "arith", "version": "1.0", "digest": tasks["arith"].digest},
            {"name": "caps", "version": "1.0", "digest": tasks["caps"].digest},
        ],
        "num_fewshot": 0,
        "limit": 0,
        "seed": 7,
        "chat_template": True,
        "metrics": ["arith-acc_norm", "caps-acc"],
        "procedure_version": HARNESS_PROCEDURE,
    }
    canonical = json.dumps(fields, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    import hashlib

    assert eval_contract_hash(fields) == "sha256:" + hashlib.sha256(canonical.encode()).hexdigest()
    inputs = suite.inputs()
    assert inputs["eval_tasks"] == f"arith@1.0@{tasks['arith'].digest},caps@1.0@{tasks['caps'].digest}"
    assert inputs["eval_metrics"] == "caps-acc,arith-acc_norm", "the suite's order: its first metric ranks"


# --- the shipped catalog ---------------------------------------------------------------------------------


def run_command(text: str) -> RunCommand:
    cmd = parse_command(text)
    assert isinstance(cmd, RunCommand)
    return cmd


def test_sft_tiny_lmeval_pins_the_suite_and_hands_the_job_its_contract(catalog: Catalog) -> None:
    plan = catalog.plan(run_command("run recipe=sft-tiny-lmeval"))
    suite = catalog.suites["tiny"]
    assert plan.eval_contract == suite.contract()
    assert plan.eval_contract_hash == eval_contract_hash(suite.contract())
    assert plan.pins["eval_suite"] == f"tiny@{plan.eval_contract_hash}"
    for key, value in suite.inputs().items():
        assert plan.params[key] == value, key
    assert plan.params["eval_dataset_name"] == "", "no evaluation during training: the harness runs at the end"
    assert plan.params["eval_contract_hash"] == plan.eval_contract_hash


def test_the_shipped_suite_pins_the_lm_eval_release_of_the_constraints(catalog: Catalog) -> None:
    constraints = (Path(__file__).resolve().parents[3] / "constraints.txt").read_text()
    pinned = [
        line.split("==")[1] for line in constraints.splitlines() if line.lower().startswith(("lm-eval==", "lm_eval=="))
    ]
    assert pinned == [catalog.suites["tiny"].spec.harness_version]


def test_a_task_edited_after_the_catalog_loaded_is_refused_at_plan_time(fresh_dir: Path) -> None:
    catalog = Catalog.load(fresh_dir)
    data = next((fresh_dir / "evals" / "tasks" / "tiny_capitals").glob("*.jsonl"))
    data.write_text(data.read_text() + data.read_text().splitlines()[0] + "\n")
    with pytest.raises(PlanError, match="eval task tiny_capitals changed since the catalog loaded"):
        catalog.plan(run_command("run recipe=sft-tiny-lmeval"))


def test_a_recipe_naming_an_unknown_suite_or_a_reward_model_on_a_suite_is_refused_at_load(fresh_dir: Path) -> None:
    recipe = (fresh_dir / "recipes" / "sft-tiny-lmeval.yaml").read_text()
    write(fresh_dir, "recipes/sft-tiny-lmeval.yaml", recipe.replace("suite: tiny", "suite: tiny2"))
    with pytest.raises(CatalogError, match=r"eval.suite: no suite 'tiny2'; did you mean tiny\?"):
        Catalog.load(fresh_dir)
    write(fresh_dir, "recipes/sft-tiny-lmeval.yaml", recipe.replace("suite: tiny", "suite: tiny\n  metrics: [x]"))
    with pytest.raises(CatalogError, match="give `suite` alone"):
        Catalog.load(fresh_dir)
    write(fresh_dir, "recipes/sft-tiny-lmeval.yaml", recipe)
    reward = (fresh_dir / "recipes" / "reward-tiny.yaml").read_text()
    start = reward.index("eval:")
    end = reward.index("\npresets:")
    write(fresh_dir, "recipes/reward-tiny.yaml", reward[:start] + "eval:\n  suite: tiny" + reward[end:])
    with pytest.raises(CatalogError, match="trl-reward runs no evaluation harness"):
        Catalog.load(fresh_dir)


def base_of(run: str = "sft-tiny-1") -> ChainBase:
    return ChainBase(run_name=run, run_uuid="u" * 32, model_digest="sha256:" + "a" * 64, model_pin="")


def test_an_evaluation_runs_the_lm_eval_job_on_the_base_model_with_the_suites_contract(catalog: Catalog) -> None:
    plan = catalog.plan_eval("sft-tiny", base=base_of(), subject="run sft-tiny-1", suite="tiny")
    suite = catalog.suites["tiny"]
    assert (plan.kind, plan.component, plan.recipe) == ("eval", "lm-eval", "sft-tiny")
    assert plan.eval_contract == suite.contract(), "the same contract as a training run on the suite"
    assert plan.params["model_name_or_path"] == "outputs/model"
    assert plan.params["base_run"] == "u" * 32 and plan.params["base_model_digest"] == "sha256:" + "a" * 64
    assert plan.params["subject"] == "run sft-tiny-1"
    assert plan.pins["base"] == f"sft-tiny-1@sha256:{'a' * 64}" and "dataset" not in plan.pins
    init = plan.operation["runPatch"]["init"]
    assert init == [{"artifacts": {"dirs": [f"{'u' * 32}/outputs/model"]}}]
    assert plan.operation["component"]["run"]["container"]["command"][-1] == "trainer.eval_run"


def test_an_evaluation_without_suite_takes_the_recipes_or_says_which_suites_there_are(catalog: Catalog) -> None:
    plan = catalog.plan_eval("sft-tiny-lmeval", base=base_of(), subject="run x")
    assert plan.pins["eval_suite"].startswith("tiny@")
    with pytest.raises(PlanError, match=r"eval contract is the trainer's own.*suite=NAME` \(suites: tiny\)"):
        catalog.plan_eval("sft-tiny", base=base_of(), subject="run x")
    with pytest.raises(PlanError, match=r"no evaluation suite 'tinny'; did you mean tiny\?"):
        catalog.plan_eval("sft-tiny", base=base_of(), subject="run x", suite="tinny")
